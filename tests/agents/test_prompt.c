/* Unit tests of the LLM agents' prompts (plugins/llm/prompt.c): a C search shows the manifest, the
 * reference and the candidate ABI and asks for ```c blocks; a ModelNew search (LANGUAGE_PYTHON)
 * shows the Model module as the reference, states KernelBench's contract as kgate enforces it,
 * leaves the C ABI out and asks for ```python blocks; seeds keep their own language. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plugins/llm/llm.h"

#define MODEL                                                                                                 \
	"import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"         \
	"        return torch.softmax(x, dim=1)\n\n\nbatch_size = 16\nfeatures = 64\n\n\ndef get_inputs():\n" \
	"    return [torch.randn(batch_size, features)]\n\n\ndef get_init_inputs():\n    return []\n"

struct req {
	Kgate__V1__ProposeRequest r;
	Kgate__V1__Task t;
	Kgate__V1__TensorSpec in, out, *ins[1], *outs[1];
	char *shape[2];
	Kgate__V1__Budget b;
	Kgate__V1__CandidateResult seed, *seeds[1];
};

/* A request for the softmax task, its reference the Model module, in language lang. */
static void request(struct req *q, Kgate__V1__Language lang, const char *manifest)
{
	memset(q, 0, sizeof(*q));
	kgate__v1__propose_request__init(&q->r);
	kgate__v1__task__init(&q->t);
	kgate__v1__tensor_spec__init(&q->in);
	kgate__v1__tensor_spec__init(&q->out);
	kgate__v1__budget__init(&q->b);
	q->shape[0] = "batch_size";
	q->shape[1] = "features";
	q->in.name = "x";
	q->out.name = "y";
	q->in.dtype = q->out.dtype = "f32";
	q->in.role = "activation";
	q->in.n_shape = q->out.n_shape = 2;
	q->in.shape = q->out.shape = q->shape;
	q->ins[0] = &q->in;
	q->outs[0] = &q->out;
	q->t.name = "softmax";
	q->t.description = "row softmax";
	q->t.manifest = (char *)manifest;
	q->t.reference_source = MODEL;
	q->t.abi_header = "/* kgate/kernel.h */ int kg_forward(void);";
	q->t.n_inputs = q->t.n_outputs = 1;
	q->t.inputs = q->ins;
	q->t.outputs = q->outs;
	q->t.shape_set = "nominal";
	q->t.language = lang;
	q->r.task = &q->t;
	q->r.round = 1;
	q->b.rounds_left = 0;
	q->r.budget = &q->b;
	q->r.branch = 2;
	q->r.candidates_per_idea = 2;
}

static void test_modelnew_prompt(void **state)
{
	(void)state;
	struct req q;
	request(&q, KGATE__V1__LANGUAGE__LANGUAGE_PYTHON, "");
	kg_buf b = {0};
	assert_int_equal(kg_prompt_candidates(&q.r, "fuse max and sum", 2, &b), 0);
	const char *p = kg_buf_str(&b);
	assert_non_null(strstr(p, "KernelBench ModelNew module"));
	assert_non_null(strstr(p, "`class ModelNew(nn.Module)` with the same constructor arguments and forward "
				  "signature as Model"));
	assert_non_null(strstr(p, "torch.utils.cpp_extension.load_inline"));
	assert_non_null(strstr(p, "extra_cflags limited to -O*, -D*, -std=c++NN, fast math"));
	assert_non_null(strstr(p, "match the Model's state_dict order and shapes (they get the Model's values)"));
	/* the Model module is the reference, shown whole */
	assert_non_null(strstr(p, "```python\n" MODEL "\n```"));
	/* nothing of the C ABI, and no empty manifest section */
	assert_null(strstr(p, "kg_forward"));
	assert_null(strstr(p, "kgate/kernel.h"));
	assert_null(strstr(p, "task.yaml"));
	assert_non_null(strstr(p, "in its own ```python fenced block"));
	kg_buf_free(&b);
	/* the ideas prompt carries the same task */
	assert_int_equal(kg_prompt_ideas(&q.r, &b), 0);
	assert_non_null(strstr(kg_buf_str(&b), "class ModelNew(nn.Module)"));
	kg_buf_free(&b);
}

static void test_c_prompt(void **state)
{
	(void)state;
	struct req q;
	request(&q, KGATE__V1__LANGUAGE__LANGUAGE_C, "name: softmax\n");
	kg_buf b = {0};
	assert_int_equal(kg_prompt_candidates(&q.r, "vectorise", 1, &b), 0);
	const char *p = kg_buf_str(&b);
	assert_non_null(strstr(p, "## Manifest (task.yaml)\n```yaml\nname: softmax\n"));
	/* a C candidate for a module task: the Model is the reference, the inputs are kg_forward's */
	assert_non_null(strstr(p, "Trusted reference implementation (PyTorch module, run by torch)"));
	assert_non_null(strstr(p, "kg_forward"));
	assert_non_null(strstr(p, "/* kgate/kernel.h */"));
	assert_null(strstr(p, "class ModelNew"));
	assert_non_null(strstr(p, "in its own ```c fenced block"));
	kg_buf_free(&b);
}

/* A seed is shown in its own language: a C search may have verified a ModelNew beside C ones. */
static void test_seed_language(void **state)
{
	(void)state;
	struct req q;
	request(&q, KGATE__V1__LANGUAGE__LANGUAGE_C, "");
	kgate__v1__candidate_result__init(&q.seed);
	q.seed.id = "0123456789abcdef";
	q.seed.idea_text = "plain torch";
	q.seed.source = "class ModelNew(nn.Module):\n    pass\n";
	q.seed.language = KGATE__V1__LANGUAGE__LANGUAGE_PYTHON;
	q.seed.verdict = KGATE__V1__VERDICT__VERDICT_ACCEPTED;
	q.seeds[0] = &q.seed;
	q.r.n_seeds = 1;
	q.r.seeds = q.seeds;
	kg_buf b = {0};
	assert_int_equal(kg_prompt_ideas(&q.r, &b), 0);
	assert_non_null(strstr(kg_buf_str(&b), "```python\nclass ModelNew(nn.Module):\n    pass\n\n```"));
	kg_buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_modelnew_prompt),
		cmocka_unit_test(test_c_prompt),
		cmocka_unit_test(test_seed_language),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

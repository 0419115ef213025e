/* The prompts: what the kernel must compute (manifest, reference, shapes, dtypes, the candidate
 * ABI, the backend; for a ModelNew search, the Model module and KernelBench's contract) and
 * everything the verifier found about earlier candidates, so that the model learns from compile
 * errors, rejected checks and timings instead of repeating them. */
#include "plugins/llm/llm.h"

#include <string.h>

/* Bounds on what goes back to the model: enough to act on, not a context window of logs. */
#define MAX_FEEDBACK 12
#define MAX_COMPILE_LOG 1500
#define MAX_REASONS 4
#define MAX_SEED_SOURCES 2

const char *kg_prompt_system(void)
{
	return "You are an expert performance engineer who writes fast, correct compute kernels. Your code is "
	       "compiled and checked by kgate, a hardened verifier: it runs the kernel on secret random inputs of "
	       "several classes and shapes, compares against a trusted reference, watches for modified inputs, "
	       "unwritten outputs, cached or precomputed results, extra threads or streams, file, network or "
	       "process access, and times the kernel against the reference. Shortcuts are detected and rejected; "
	       "only honest speed counts.";
}

static const char *lang_name(Kgate__V1__Language l)
{
	return l == KGATE__V1__LANGUAGE__LANGUAGE_CUDA	   ? "CUDA C++ (.cu, compiled with nvcc)"
	       : l == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? "PyTorch (a KernelBench ModelNew module, .py, run by torch)"
							   : "C11 (.c, compiled with cc -O2)";
}

static const char *fence(Kgate__V1__Language l)
{
	return l == KGATE__V1__LANGUAGE__LANGUAGE_CUDA ? "cuda" : l == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? "python" : "c";
}

/* A task given as a KernelBench-format module: its Model is the reference. */
static int model_reference(const Kgate__V1__Task *t)
{
	return strstr(t->reference_source, "class Model") && strstr(t->reference_source, "def get_inputs");
}

/* What a ModelNew module must be: KernelBench's contract, with what kgate enforces on it. */
static void modelnew_section(const Kgate__V1__Task *t, kg_buf *b)
{
	kg_buf_printf(b,
		      "\n## The reference: the Model module (run by torch)\nModelNew must compute what Model.forward "
		      "computes; its constructor gets get_init_inputs(), its forward get_inputs()'s tensors (new random "
		      "values on every call).\n```python\n%s\n```\n",
		      t->reference_source);
	kg_buf_printf(b,
		      "\nA candidate is ONE complete Python module that:\n"
		      "- writes `class ModelNew(nn.Module)` with the same constructor arguments and forward signature as "
		      "Model, returning what Model.forward returns;\n"
		      "- may use torch and C++/CUDA through `torch.utils.cpp_extension.load_inline` (kgate compiles the "
		      "extension itself; extra_cflags limited to -O*, -D*, -std=c++NN, fast math);\n"
		      "- has parameters and buffers that match the Model's state_dict order and shapes (they get the "
		      "Model's values);\n"
		      "- computes every output element on every call from the current inputs, never writes to inputs, keeps "
		      "no state between calls, starts no threads, opens no files or sockets, and does not call the "
		      "reference.\n");
}

static void tensors(kg_buf *b, const char *what, Kgate__V1__TensorSpec **t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		kg_buf_printf(b, "- %s %zu: %s, %s [", what, i, t[i]->name, t[i]->dtype);
		for (size_t k = 0; k < t[i]->n_shape; k++)
			kg_buf_printf(b, "%s%s", k ? ", " : "", t[i]->shape[k]);
		kg_buf_printf(b, "]%s%s\n", t[i]->role[0] ? ", " : "", t[i]->role);
	}
}

static void task_section(const Kgate__V1__ProposeRequest *r, kg_buf *b)
{
	const Kgate__V1__Task *t = r->task;
	if (!t) {
		kg_buf_printf(b, "(the request carried no task description)\n");
		return;
	}
	Kgate__V1__Language lang = t->language;
	int py = lang == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON;
	kg_buf_printf(b, "# Task: %s\n%s\n\nBackend: %s.\n\n", t->name, t->description, lang_name(lang));
	kg_buf_printf(b, py ? "Tensors (symbolic shapes): the activation inputs are forward()'s arguments, in order; "
			      "inputs of role weight or bias are the Model's parameters and buffers, in state_dict order:\n"
			    : "Tensors, in the order kg_forward receives them (symbolic shapes):\n");
	tensors(b, "input", t->inputs, t->n_inputs);
	tensors(b, "output", t->outputs, t->n_outputs);
	kg_buf_printf(b, "\nShape sets:");
	for (size_t i = 0; i < t->n_shape_sets; i++) {
		kg_buf_printf(b, "\n- %s:", t->shape_sets[i]->name);
		for (size_t k = 0; k < t->shape_sets[i]->n_dims; k++)
			kg_buf_printf(b, " %s=%lld", t->shape_sets[i]->dims[k]->name, (long long)t->shape_sets[i]->dims[k]->value);
	}
	kg_buf_printf(b, "\nCandidates are verified on the '%s' shapes%s; the code must work for any shape, read the "
			 "sizes from the tensors.\n",
		      t->shape_set, t->shape_variants ? " and on variants (odd sizes, 1-element dimensions)" : "");
	kg_buf_printf(b, "Tolerance: atol %g, rtol %g.\n", t->atol, t->rtol);
	if (t->cost_bytes[0] || t->cost_flops[0])
		kg_buf_printf(b, "Minimum cost per call: bytes %s, flops %s.\n", t->cost_bytes[0] ? t->cost_bytes : "?",
			      t->cost_flops[0] ? t->cost_flops : "?");
	/* a task given as a module has no task.yaml: what it says is above, the module below */
	if (t->manifest[0])
		kg_buf_printf(b, "\n## Manifest (task.yaml)\n```yaml\n%s\n```\n", t->manifest);
	if (py) {
		modelnew_section(t, b);
		return;
	}
	/* a task derived from a KernelBench-format module: its Model is the reference, and the weights
	 * are inputs the candidate gets after get_inputs()'s tensors, in state_dict order */
	if (model_reference(t))
		kg_buf_printf(b,
			      "\n## Trusted reference implementation (PyTorch module, run by torch)\nkg_forward receives "
			      "get_inputs()'s tensors first, then the Model's parameters and buffers in state_dict order "
			      "(the inputs listed above with role weight or bias); they are random on every call, never "
			      "their default initialisation. Compute forward() exactly.\n```python\n%s\n```\n",
			      t->reference_source);
	else
		kg_buf_printf(b, "\n## Trusted reference implementation (C)\n```c\n%s\n```\n", t->reference_source);
	if (lang == KGATE__V1__LANGUAGE__LANGUAGE_CUDA && t->reference_cuda[0])
		kg_buf_printf(b, "\n## CUDA reference\n```cuda\n%s\n```\n", t->reference_cuda);
	kg_buf_printf(b, "\n## The candidate ABI (<kgate/kernel.h>)\n```c\n%s\n```\n", t->abi_header);
	kg_buf_printf(b,
		      "\nA candidate is ONE complete %s source file that:\n"
		      "- starts with `#include <kgate/kernel.h>` and contains the line `KG_CANDIDATE;` at file scope;\n"
		      "- defines `int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)`%s,"
		      " returning 0 on success;\n"
		      "- computes every output element on every call from the current inputs, never writes to inputs, keeps "
		      "no state between calls, starts no threads, opens no files or sockets, and does not call the "
		      "reference.\n",
		      lang == KGATE__V1__LANGUAGE__LANGUAGE_CUDA ? "CUDA" : "C",
		      lang == KGATE__V1__LANGUAGE__LANGUAGE_CUDA
			      ? " with extern \"C\" linkage, launching all work on `(cudaStream_t)stream` and not synchronising the device"
			      : "");
}

static void result_line(kg_buf *b, const Kgate__V1__CandidateResult *c)
{
	const char *v = c->verdict == KGATE__V1__VERDICT__VERDICT_ACCEPTED   ? "ACCEPTED"
			: c->verdict == KGATE__V1__VERDICT__VERDICT_REJECTED ? "REJECTED"
									     : "NOT VERIFIED (infrastructure error)";
	kg_buf_printf(b, "\n### Candidate %.12s (round %u, idea: %s): %s\n", c->id, c->round,
		      c->idea_text[0] ? c->idea_text : "-", v);
	if (c->timed && c->timing)
		kg_buf_printf(b, "Time: %.4f ms vs reference %.4f ms (speedup %.2fx), %.1f GB/s, %.0f%% of the memory roofline.\n",
			      c->timing->median_ms, c->timing->reference_median_ms, c->timing->speedup, c->timing->gbps,
			      100.0 * c->timing->roofline);
	/* The first reason of each code: a model learns more from four different findings than from
	 * the same one on four input classes. */
	size_t shown = 0;
	for (size_t i = 0; i < c->n_reasons && shown < MAX_REASONS; i++) {
		const Kgate__V1__Reason *r = c->reasons[i];
		int repeat = 0;
		for (size_t k = 0; k < i && !repeat; k++)
			repeat = !strcmp(c->reasons[k]->code, r->code);
		if (repeat)
			continue;
		shown++;
		kg_buf_printf(b, "- %s: %s", r->code, r->message);
		if (r->input_class[0])
			kg_buf_printf(b, " [inputs %s, shape %s]", r->input_class, r->shape);
		if (r->tensor[0] && r->index >= 0)
			kg_buf_printf(b, " [%s element %lld]", r->tensor, (long long)r->index);
		if (r->has_values)
			kg_buf_printf(b, " expected %.9g, got %.9g", r->expected, r->got);
		kg_buf_printf(b, "\n");
	}
	if (c->n_reasons > shown)
		kg_buf_printf(b, "- ... and %zu more reasons\n", c->n_reasons - shown);
	if (c->compile_log[0] && c->verdict != KGATE__V1__VERDICT__VERDICT_ACCEPTED) {
		size_t n = strlen(c->compile_log);
		kg_buf_printf(b, "Compiler output%s:\n```\n%.*s\n```\n", n > MAX_COMPILE_LOG ? " (truncated)" : "",
			      MAX_COMPILE_LOG, c->compile_log);
	}
	if (c->error[0])
		kg_buf_printf(b, "Error: %s\n", c->error);
}

static void history_section(const Kgate__V1__ProposeRequest *r, kg_buf *b)
{
	Kgate__V1__Language lang = r->task ? r->task->language : KGATE__V1__LANGUAGE__LANGUAGE_C;
	if (r->n_seeds) {
		kg_buf_printf(b, "\n## The fastest accepted candidates so far (improve on these)\n");
		for (size_t i = 0; i < r->n_seeds; i++) {
			result_line(b, r->seeds[i]);
			/* a seed in its own language: a search may verify ModelNew proposals beside C */
			if (i < MAX_SEED_SOURCES && r->seeds[i]->source[0])
				kg_buf_printf(b, "```%s\n%s\n```\n",
					      fence(r->seeds[i]->language ? r->seeds[i]->language : lang),
					      r->seeds[i]->source);
		}
	}
	if (r->n_history) {
		size_t from = r->n_history > MAX_FEEDBACK ? r->n_history - MAX_FEEDBACK : 0;
		kg_buf_printf(b, "\n## What the verifier found about earlier candidates (most recent %zu of %zu)\n",
			      r->n_history - from, r->n_history);
		for (size_t i = from; i < r->n_history; i++)
			result_line(b, r->history[i]);
		kg_buf_printf(b, "\nDo not repeat a rejected approach; fix what the reasons and compiler output say.\n");
	}
}

int kg_prompt_ideas(const Kgate__V1__ProposeRequest *r, kg_buf *out)
{
	task_section(r, out);
	history_section(r, out);
	unsigned budget_left = r->budget ? r->budget->rounds_left : 0;
	kg_buf_printf(out,
		      "\n# Round %u (%u more after this one)\nPropose %u distinct ideas for making this kernel faster than "
		      "the fastest accepted candidate (or, if none is accepted yet, for a first correct and fast version). "
		      "Each idea is one or two sentences naming the optimisation (memory access pattern, vectorisation, "
		      "blocking, fusion of passes, numerically safe reformulation, ...).\n"
		      "Answer with a JSON array of %u strings in a ```json fenced block, nothing else.\n",
		      r->round, budget_left, r->branch, r->branch);
	return out->data ? 0 : -1;
}

int kg_prompt_candidates(const Kgate__V1__ProposeRequest *r, const char *idea, unsigned n, kg_buf *out)
{
	Kgate__V1__Language lang = r->task ? r->task->language : KGATE__V1__LANGUAGE__LANGUAGE_C;
	task_section(r, out);
	history_section(r, out);
	kg_buf_printf(out,
		      "\n# Round %u: implement this idea\n%s\n\nWrite %u different complete implementations of this idea "
		      "(different tilings or variants). Put each complete source file in its own ```%s fenced block. "
		      "Explanations, if any, go outside the blocks.\n",
		      r->round, idea, n, fence(lang));
	return out->data ? 0 : -1;
}

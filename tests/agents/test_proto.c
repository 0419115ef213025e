/* Unit tests of the kgate.v1 messages: full round trips of every message the core and plugins
 * exchange, forward compatibility (fields a newer peer adds are skipped, not fatal) and
 * rejection of garbage. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/kgate.pb-c.h"

static uint8_t *pack_request(size_t *len)
{
	static char *shape[] = {"R", "C"};
	Kgate__V1__TensorSpec x = KGATE__V1__TENSOR_SPEC__INIT, *inputs[] = {&x};
	x.name = "x";
	x.dtype = "f32";
	x.n_shape = 2;
	x.shape = shape;
	Kgate__V1__Dim r = KGATE__V1__DIM__INIT, c = KGATE__V1__DIM__INIT, *dims[] = {&r, &c};
	r.name = "R", r.value = 64;
	c.name = "C", c.value = 1000;
	Kgate__V1__ShapeSet ci = KGATE__V1__SHAPE_SET__INIT, *sets[] = {&ci};
	ci.name = "ci";
	ci.n_dims = 2;
	ci.dims = dims;
	Kgate__V1__Task t = KGATE__V1__TASK__INIT;
	t.name = "softmax";
	t.manifest = "kgate_task: 1\n";
	t.reference_source = "int kg_forward(...)";
	t.n_inputs = 1;
	t.inputs = inputs;
	t.n_shape_sets = 1;
	t.shape_sets = sets;
	t.language = KGATE__V1__LANGUAGE__LANGUAGE_CUDA;
	t.atol = 1e-9;
	Kgate__V1__Reason why = KGATE__V1__REASON__INIT, *reasons[] = {&why};
	why.code = "check.mismatch";
	why.message = "y[17]: expected 0.5, got 0.25";
	why.index = 17;
	why.has_values = 1;
	why.expected = 0.5;
	why.got = 0.25;
	Kgate__V1__Timing tm = KGATE__V1__TIMING__INIT;
	tm.median_ms = 0.125;
	tm.speedup = 1.5;
	tm.roofline = 0.42;
	Kgate__V1__CandidateResult h = KGATE__V1__CANDIDATE_RESULT__INIT, *hist[] = {&h};
	h.id = "abc";
	h.round = 1;
	h.verdict = KGATE__V1__VERDICT__VERDICT_REJECTED;
	h.n_reasons = 1;
	h.reasons = reasons;
	h.compile_log = "error: expected ';'";
	h.timed = 1;
	h.timing = &tm;
	Kgate__V1__Budget b = KGATE__V1__BUDGET__INIT;
	b.rounds_total = 5;
	b.rounds_left = 3;
	b.max_candidates = 8;
	Kgate__V1__ProposeRequest q = KGATE__V1__PROPOSE_REQUEST__INIT;
	q.version = KGATE__V1__PROTO_VERSION__PROTO_VERSION_CURRENT;
	q.task = &t;
	q.round = 2;
	q.budget = &b;
	q.branch = 4;
	q.candidates_per_idea = 2;
	q.n_history = 1;
	q.history = hist;
	*len = kgate__v1__propose_request__get_packed_size(&q);
	uint8_t *buf = malloc(*len + 16);
	assert_int_equal(kgate__v1__propose_request__pack(&q, buf), *len);
	return buf;
}

static void test_request_round_trip(void **state)
{
	(void)state;
	size_t len;
	uint8_t *buf = pack_request(&len);
	Kgate__V1__ProposeRequest *q = kgate__v1__propose_request__unpack(NULL, len, buf);
	assert_non_null(q);
	assert_int_equal(q->version, 1);
	assert_int_equal(q->round, 2);
	assert_int_equal(q->branch, 4);
	assert_int_equal(q->budget->rounds_left, 3);
	assert_string_equal(q->task->name, "softmax");
	assert_string_equal(q->task->inputs[0]->shape[1], "C");
	assert_int_equal(q->task->shape_sets[0]->dims[1]->value, 1000);
	assert_int_equal(q->task->language, KGATE__V1__LANGUAGE__LANGUAGE_CUDA);
	assert_true(q->task->atol == 1e-9);
	const Kgate__V1__CandidateResult *h = q->history[0];
	assert_int_equal(h->verdict, KGATE__V1__VERDICT__VERDICT_REJECTED);
	assert_string_equal(h->reasons[0]->code, "check.mismatch");
	assert_int_equal(h->reasons[0]->index, 17);
	assert_true(h->reasons[0]->got == 0.25);
	assert_true(h->timing->roofline == 0.42);
	assert_string_equal(h->compile_log, "error: expected ';'");
	/* absent strings read as "", never NULL */
	assert_string_equal(q->task->reference_cuda, "");
	kgate__v1__propose_request__free_unpacked(q, NULL);

	/* A newer peer's field (number 99, length-delimited) is skipped. */
	const uint8_t extra[] = {0x9a, 0x06, 3, 'n', 'e', 'w'}; /* varint tag (99 << 3) | 2 */
	memcpy(buf + len, extra, sizeof(extra));
	q = kgate__v1__propose_request__unpack(NULL, len + sizeof(extra), buf);
	assert_non_null(q);
	assert_int_equal(q->round, 2);
	kgate__v1__propose_request__free_unpacked(q, NULL);
	/* truncated or garbage input is refused, not misread */
	assert_null(kgate__v1__propose_request__unpack(NULL, len - 3, buf));
	const uint8_t junk[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	assert_null(kgate__v1__propose_request__unpack(NULL, sizeof(junk), junk));
	free(buf);
}

static void test_response_and_host_frames(void **state)
{
	(void)state;
	char *ideas[] = {"fuse the passes", "vectorise"};
	Kgate__V1__Candidate c1 = KGATE__V1__CANDIDATE__INIT, c2 = KGATE__V1__CANDIDATE__INIT, *cs[] = {&c1, &c2};
	c1.source = "int kg_forward() {}";
	c1.language = KGATE__V1__LANGUAGE__LANGUAGE_C;
	c2.source = "__global__ void k() {}";
	c2.idea = 1;
	c2.name = "b.cu";
	Kgate__V1__ProposeResponse r = KGATE__V1__PROPOSE_RESPONSE__INIT;
	r.version = 1;
	r.n_ideas = 2;
	r.ideas = ideas;
	r.n_candidates = 2;
	r.candidates = cs;
	r.log = "2 calls";
	size_t len = kgate__v1__propose_response__get_packed_size(&r);
	uint8_t *buf = malloc(len);
	kgate__v1__propose_response__pack(&r, buf);

	/* wrapped in a HostReply, as the helper process sends it */
	Kgate__V1__HostReply hr = KGATE__V1__HOST_REPLY__INIT;
	hr.payload.data = buf;
	hr.payload.len = len;
	hr.plugin_name = "x";
	hr.abi_major = 1;
	size_t hl = kgate__v1__host_reply__get_packed_size(&hr);
	uint8_t *hb = malloc(hl);
	kgate__v1__host_reply__pack(&hr, hb);
	Kgate__V1__HostReply *hu = kgate__v1__host_reply__unpack(NULL, hl, hb);
	assert_non_null(hu);
	assert_int_equal(hu->status, 0);
	assert_int_equal(hu->payload.len, len);
	Kgate__V1__ProposeResponse *u = kgate__v1__propose_response__unpack(NULL, hu->payload.len, hu->payload.data);
	assert_non_null(u);
	assert_int_equal(u->n_candidates, 2);
	assert_int_equal(u->candidates[1]->idea, 1);
	assert_string_equal(u->candidates[1]->name, "b.cu");
	assert_string_equal(u->ideas[0], "fuse the passes");
	assert_string_equal(u->error, "");
	kgate__v1__propose_response__free_unpacked(u, NULL);
	kgate__v1__host_reply__free_unpacked(hu, NULL);
	free(hb);
	free(buf);

	Kgate__V1__HostCall call = KGATE__V1__HOST_CALL__INIT;
	call.kind = KGATE__V1__HOST_CALL__KIND__KIND_CREATE;
	uint8_t cb[16];
	size_t cl = kgate__v1__host_call__pack(&call, cb);
	Kgate__V1__HostCall *cu = kgate__v1__host_call__unpack(NULL, cl, cb);
	assert_int_equal(cu->kind, KGATE__V1__HOST_CALL__KIND__KIND_CREATE);
	assert_int_equal(cu->payload.len, 0);
	kgate__v1__host_call__free_unpacked(cu, NULL);
}

static void test_config(void **state)
{
	(void)state;
	Kgate__V1__Setting s = KGATE__V1__SETTING__INIT, *ps[] = {&s};
	s.key = "model";
	s.value = "m";
	Kgate__V1__AgentConfig c = KGATE__V1__AGENT_CONFIG__INIT;
	c.version = 1;
	c.n_settings = 1;
	c.settings = ps;
	c.seed = 0xfeedfacecafebeefull;
	uint8_t buf[128];
	size_t n = kgate__v1__agent_config__pack(&c, buf);
	Kgate__V1__AgentConfig *u = kgate__v1__agent_config__unpack(NULL, n, buf);
	assert_non_null(u);
	assert_string_equal(u->settings[0]->key, "model");
	assert_true(u->seed == 0xfeedfacecafebeefull);
	kgate__v1__agent_config__free_unpacked(u, NULL);
	/* an empty message is a valid, empty config */
	u = kgate__v1__agent_config__unpack(NULL, 0, buf);
	assert_non_null(u);
	assert_int_equal(u->n_settings, 0);
	kgate__v1__agent_config__free_unpacked(u, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_round_trip),
		cmocka_unit_test(test_response_and_host_frames),
		cmocka_unit_test(test_config),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

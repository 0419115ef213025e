/* The verification protocol: compile, statically check, run the reference and the candidate in
 * separate sandboxed processes on secret-seeded inputs of every class and shape, check every run
 * (canaries, inputs, unwritten outputs, tolerance, shortcuts), then time both side by side on
 * fresh inputs, re-checking each timed result. The candidate never sees a seed or a reference. */
#include "verifier/verify.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "policy/policy.h"
#include "verifier/arena.h"
#include "verifier/compare.h"
#include "verifier/compile.h"
#include "verifier/dtype.h"
#include "verifier/elfsyms.h"
#include "verifier/gpu.h"
#include "verifier/inputs.h"
#include "verifier/prng.h"
#include "verifier/sanitizer.h"
#include "verifier/session.h"
#include "verifier/task.h"

#define MAX_T KG_MAX_TENSORS
#define MAX_SHAPES (1 + KG_MAX_VARIANTS)

struct vctx {
	const struct kg_verify_opts *o;
	struct kg_verdict *v;
	struct kg_policy pol;
	struct kg_task task;
	const char *backend, *ref_backend;
	int is_cuda, ref_is_cuda;
	char work[PATH_MAX];
	char ref_so[PATH_MAX + 32], cand_so[PATH_MAX + 32];
	struct kg_arena ra, ca;
	struct kg_session rs, cs;
	int rs_up, cs_up;
	struct kg_sb_limits limits;
	kg_dims shapes[MAX_SHAPES];
	int n_shapes;
	kg_dims cur;
	char cur_str[128];
	int cur_shape;
	void *shadow[MAX_T], *refout[MAX_T], *snap[MAX_T];
	double atol, rtol, rms_tol;
	double atol_eff[MAX_T]; /* atol plus rms_tol times the RMS of this trial's reference output */
	uint64_t master;
	int cand_dead;
	uint64_t ref_ns_last;
	uint64_t ref_download_ns; /* the trusted runner's last DOWNLOAD round trip: copy cost, no work */
	uint64_t seq_poison_ref;
	unsigned degenerate_mask;
	int n_trials, n_class_checks, n_degenerate;
	uint64_t prev_in_hash, prev_cand_hash[MAX_T];
	int have_prev, prev_mismatch;
	int progress, trial_no, trial_total;
	struct kg_gpu_info gpu;
	char sanitizer[PATH_MAX]; /* compute-sanitizer, when the policy asks for sanitized runs */
};

/* ---- small helpers ---- */

static void progress(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void progress(struct vctx *c, const char *fmt, ...)
{
	if (!c->progress)
		return;
	char line[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "\r\033[K[kgate] %s: %s", c->task.name, line);
	fflush(stderr);
}

static double secs_since(uint64_t t0)
{
	return (double)(kg_now_ns() - t0) / 1e9;
}

/* A fast keyed hash over whole words, for telling outputs apart between trials. */
static uint64_t content_hash(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
	}
	for (; i < n; i++)
		h = (h ^ s[i]) * 0xc4ceb9fe1a85ec53ull;
	return h;
}

static double output_rms(const void *p, kg_dtype dt, int64_t n)
{
	double ss = 0;
	int64_t k = 0;
	for (int64_t i = 0; i < n; i++) {
		double x = kg_load(p, dt, (size_t)i);
		if (isfinite(x)) {
			ss += x * x;
			k++;
		}
	}
	return k ? sqrt(ss / (double)k) : 0;
}

static const struct kg_tensor_spec *out_spec(struct vctx *c, int j)
{
	return &c->task.outputs[j];
}

static struct kg_reason *trial_reason(struct vctx *c, const char *code, enum kg_input_class cls, uint64_t seed,
				      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static struct kg_reason *trial_reason(struct vctx *c, const char *code, enum kg_input_class cls, uint64_t seed,
				      const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	struct kg_reason *r = kg_verdict_add_reason(c->v, code, "%s", msg);
	r->occurrences = 1;
	snprintf(r->input_class, sizeof(r->input_class), "%s", kg_class_name(cls));
	r->seed = seed;
	r->has_seed = 1;
	snprintf(r->shape, sizeof(r->shape), "%s", c->cur_str);
	return r;
}

/* One reason per (code, shape): the first instance carries the details; repeats are counted and
 * their classes listed, which is what a reader needs ("fails only for large inputs"). */
static int already_reported(struct vctx *c, const char *code, enum kg_input_class cls)
{
	for (int i = 0; i < c->v->n_reasons; i++) {
		struct kg_reason *r = &c->v->reasons[i];
		if (strcmp(r->code, code) || strcmp(r->shape, c->cur_str))
			continue;
		r->occurrences++;
		const char *name = kg_class_name(cls);
		size_t len = strlen(r->also_classes), nl = strlen(name);
		int listed = !strcmp(r->input_class, name);
		for (const char *p = r->also_classes; !listed && (p = strstr(p, name)); p += nl)
			listed = (p == r->also_classes || p[-1] == ',') && (p[nl] == ',' || !p[nl]);
		if (!listed && len + nl + 2 < sizeof(r->also_classes))
			snprintf(r->also_classes + len, sizeof(r->also_classes) - len, "%s%s", len ? "," : "", name);
		return 1;
	}
	return 0;
}

static void internal_error(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void internal_error(struct vctx *c, const char *fmt, ...)
{
	if (c->v->internal_error[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->v->internal_error, sizeof(c->v->internal_error), fmt, ap);
	va_end(ap);
}

static const char *signame(int sig)
{
	const char *s = sigabbrev_np(sig);
	return s ? s : "?";
}

/* Turns how a sandboxed process ended into a reason (for the candidate) and a sentence. */
static void describe_end(const struct kg_sb_outcome *o, char *out, size_t outsz)
{
	switch (o->end) {
	case KG_SB_END_EXIT:
		snprintf(out, outsz, "the process exited with status %d", o->exit_code);
		break;
	case KG_SB_END_SIGNAL:
		snprintf(out, outsz, "the process was killed by SIG%s%s%s", signame(o->signo), o->detail[0] ? ": " : "",
			 o->detail);
		break;
	case KG_SB_END_SYSCALL:
		snprintf(out, outsz, "denied system call %s%s%s", o->syscall[0] ? o->syscall : "(unknown)",
			 o->detail[0] ? ": " : "", o->detail);
		break;
	default:
		snprintf(out, outsz, "%s", o->detail[0] ? o->detail : "the process ended");
	}
}

static void cand_ended(struct vctx *c, const char *during, enum kg_input_class cls, uint64_t seed)
{
	const struct kg_sb_outcome *o = &c->cs.outcome;
	const char *code = kg_sb_end_reason(o->end);
	char what[700];
	describe_end(o, what, sizeof(what));
	if (!code || o->end == KG_SB_END_KILLED)
		code = "sandbox.crash";
	struct kg_reason *r = trial_reason(c, code, cls, seed, "candidate %s: %s", during, what);
	(void)r;
	c->cand_dead = 1;
}

/* ---- setup ---- */

static int make_workdir(struct vctx *c, kg_error *e)
{
	const char *tmp = getenv("TMPDIR");
	snprintf(c->work, sizeof(c->work), "%s/kgate-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(c->work))
		return kg_err(e, -errno, "mkdtemp %s: %s", c->work, strerror(errno));
	/* The sandboxed compiler runs as an unprivileged id: its scratch dirs must be reachable. */
	chmod(c->work, 0755);
	return 0;
}

static int compile_one(struct vctx *c, const char *src, const char *sub, int cuda, char *so_out, size_t so_sz,
		       struct kg_compile_result *r, const char *const *flags, int n_flags, const char (*libs)[32],
		       int n_libs, kg_error *e)
{
	char dir[PATH_MAX + 32];
	snprintf(dir, sizeof(dir), "%s/%s", c->work, sub);
	if (mkdir(dir, 0755))
		return kg_err(e, -errno, "mkdir %s: %s", dir, strerror(errno));
	if (geteuid() == 0 && chown(dir, 65534, 65534))
		return kg_err(e, -errno, "chown %s: %s", dir, strerror(errno));
	struct kg_compile_opts co = {
		.lang = cuda ? "cuda" : "c",
		.arch = c->gpu.arch[0] ? c->gpu.arch : NULL,
		.flags = flags,
		.n_flags = n_flags,
		.libs = libs,
		.n_libs = n_libs,
		.limits = c->limits,
		.required_layers = c->pol.required_layers,
		.disabled_layers = c->o->disabled_layers,
	};
	co.limits.wall_s = cuda ? 300 : 120;
	co.limits.mem_bytes = 4ull << 30;
	co.limits.nproc = 64;
	int rc = kg_compile(src, dir, "kernel.so", &co, r, e);
	snprintf(so_out, so_sz, "%s/kernel.so", dir);
	return rc;
}

static void static_check(struct vctx *c)
{
	kg_buf syms = {0}, needed = {0};
	kg_error e = {0};
	uint64_t t0 = kg_now_ns();
	int bad = 0;
	if (kg_elf_imports(c->cand_so, &syms, &needed, &e)) {
		internal_error(c, "reading the candidate's imports: %s", e.msg);
		goto out;
	}
	for (const char *s = syms.data; s && *s; s += strlen(s) + 1) {
		if (kg_policy_symbol_allowed(&c->pol, s, c->is_cuda))
			continue;
		bad++;
		struct kg_reason *r = kg_verdict_add_reason(c->v, "static.forbidden_symbol",
							    "the candidate imports '%s', which the policy does not allow", s);
		snprintf(r->tensor, sizeof(r->tensor), "%.31s", s);
	}
	for (const char *s = needed.data; s && *s; s += strlen(s) + 1) {
		if (kg_policy_library_allowed(&c->pol, s, c->is_cuda))
			continue;
		bad++;
		kg_verdict_add_reason(c->v, "static.forbidden_library",
				      "the candidate links against '%s', which the policy does not allow", s);
	}
	kg_verdict_add_check(c->v, "static-imports", bad ? KG_CHECK_FAIL : KG_CHECK_PASS, secs_since(t0),
			     bad ? "%d forbidden imports" : "every import is on the policy's allowlist", bad);
out:
	kg_buf_free(&syms);
	kg_buf_free(&needed);
}

/* Lays out both arenas for dims and tells both runners. */
static int set_shape(struct vctx *c, int idx, kg_error *e)
{
	kg_dtype dt[2 * MAX_T];
	int nd[2 * MAX_T];
	int64_t shp[2 * MAX_T][KG_MAX_DIMS];
	const struct kg_task *t = &c->task;
	c->cur = c->shapes[idx];
	c->cur_shape = idx;
	kg_dims_str(&c->cur, c->cur_str, sizeof(c->cur_str));
	for (int i = 0; i < t->n_inputs + t->n_outputs; i++) {
		const struct kg_tensor_spec *s = i < t->n_inputs ? &t->inputs[i] : &t->outputs[i - t->n_inputs];
		memset(shp[i], 0, sizeof(shp[i]));
		int rc = kg_task_shape(s, &c->cur, shp[i], e);
		if (rc)
			return rc;
		dt[i] = s->dtype;
		nd[i] = s->ndim;
	}
	int rc = kg_arena_layout(&c->ra, t->n_inputs, t->n_outputs, dt, nd, (const int64_t(*)[KG_MAX_DIMS])shp, e);
	if (!rc)
		rc = kg_arena_layout(&c->ca, t->n_inputs, t->n_outputs, dt, nd, (const int64_t(*)[KG_MAX_DIMS])shp, e);
	if (rc)
		return rc;
	c->have_prev = 0;
	return 0;
}

/* ---- one run of each side ---- */

static void gen_inputs(struct vctx *c, enum kg_input_class cls, uint64_t seed)
{
	for (int i = 0; i < c->task.n_inputs; i++) {
		const struct kg_arena_slot *s = &c->ca.slot[i];
		kg_inputs_fill(c->shadow[i], s->dtype, (size_t)s->numel, s->shape, s->ndim, c->task.inputs[i].role, cls,
			       kg_seed_derive(seed, (uint64_t)i));
	}
}

static void load_inputs(struct vctx *c, struct kg_arena *a)
{
	for (int i = 0; i < c->task.n_inputs; i++)
		memcpy(kg_arena_ptr(a, i), c->shadow[i], a->slot[i].bytes);
}

/* The trusted reference failing is kgate's problem, never the candidate's: an internal error that
 * says how the reference's process ended or what its runner answered. */
static void ref_failed(struct vctx *c, int rc, const kg_error *e, const char *doing)
{
	char what[700];
	if (rc == KG_SESSION_ENDED)
		describe_end(&c->rs.outcome, what, sizeof(what));
	else
		snprintf(what, sizeof(what), "%s", rc == KG_SESSION_FAILED ? c->rs.msg : e->msg);
	internal_error(c, "%s the reference (%s): %s", doing, c->cur_str[0] ? c->cur_str : "before any shape", what);
}

/* Runs the reference on the current shadow inputs; its outputs land in refout. Returns 0, or -1
 * after recording an internal error (the reference is trusted: its failure is kgate's). */
static int ref_run(struct vctx *c, int flush, uint64_t *ns)
{
	kg_error e = {0};
	struct kg_wire_reply r;
	struct kg_arena *a = &c->ra;
	load_inputs(c, a);
	kg_arena_poison(a, kg_seed_derive(c->master, 0x7265660000ull + c->seq_poison_ref++));
	int rc = kg_session_call(&c->rs, KG_OP_UPLOAD, 0, NULL, NULL, &e);
	if (!rc && flush)
		rc = kg_session_call(&c->rs, KG_OP_FLUSH, 0, NULL, NULL, &e);
	if (!rc)
		rc = kg_session_call(&c->rs, KG_OP_RUN, 0, &r, NULL, &e);
	if (!rc)
		rc = kg_session_call(&c->rs, KG_OP_DOWNLOAD, 0, NULL, &c->ref_download_ns, &e);
	if (rc) {
		ref_failed(c, rc, &e, "running");
		return -1;
	}
	if (r.rc) {
		internal_error(c, "the reference returned %d (%s)", r.rc, c->cur_str);
		return -1;
	}
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		if (kg_arena_unwritten(a, s, NULL) >= 0) {
			internal_error(c, "the reference left output '%s' partly unwritten (%s)", out_spec(c, j)->name,
				       c->cur_str);
			return -1;
		}
		memcpy(c->refout[j], kg_arena_ptr(a, s), a->slot[s].bytes);
		c->atol_eff[j] = c->atol;
		if (c->rms_tol > 0)
			c->atol_eff[j] += c->rms_tol * output_rms(c->refout[j], a->slot[s].dtype, a->slot[s].numel);
	}
	*ns = r.elapsed_ns;
	c->ref_ns_last = r.elapsed_ns;
	return 0;
}

struct cand_result {
	int ok; /* the call came back and kg_forward returned 0 */
	uint64_t child_ns, parent_ns;
	uint64_t span_ns; /* parent's clock from sending RUN to the DOWNLOAD reply: the outputs are
			   * complete by then, whatever the runner claims */
	uint64_t tail_ns; /* device busy after the candidate's stream was done */
};

static double cand_timeout_s(struct vctx *c)
{
	/* Generous against the reference, short enough that a hung kernel costs seconds, not the
	 * whole wall budget. */
	double t = 2.0 + 50.0 * (double)c->ref_ns_last / 1e9;
	return t < c->pol.wall_s ? t : c->pol.wall_s;
}

/* The candidate's arena before a call: this trial's inputs, fresh canaries, poisoned outputs. */
static void cand_arena_ready(struct vctx *c, uint64_t seed)
{
	load_inputs(c, &c->ca);
	kg_arena_canary_fill(&c->ca, kg_seed_derive(seed, 0x63616e61ull));
	kg_arena_poison(&c->ca, kg_seed_derive(seed, 0x706f6973ull));
}

static void cand_run(struct vctx *c, int flush, enum kg_input_class cls, uint64_t seed, struct cand_result *res)
{
	kg_error e = {0};
	struct kg_wire_reply r;
	memset(res, 0, sizeof(*res));
	cand_arena_ready(c, seed);
	c->cs.call_timeout_s = 30;
	int rc = kg_session_call(&c->cs, KG_OP_UPLOAD, 0, NULL, NULL, &e);
	if (!rc && flush)
		rc = kg_session_call(&c->cs, KG_OP_FLUSH, 0, NULL, NULL, &e);
	if (!rc) {
		c->cs.call_timeout_s = cand_timeout_s(c);
		rc = kg_session_call(&c->cs, KG_OP_RUN, 0, &r, &res->parent_ns, &e);
		c->cs.call_timeout_s = 30;
	}
	if (!rc) {
		uint64_t dl_ns = 0;
		rc = kg_session_call(&c->cs, KG_OP_DOWNLOAD, 0, NULL, &dl_ns, &e);
		res->span_ns = res->parent_ns + dl_ns;
	}
	if (rc == KG_SESSION_ENDED) {
		cand_ended(c, "during kg_forward", cls, seed);
		return;
	}
	if (rc == KG_SESSION_FAILED) {
		/* The runner survived but the device did not: a faulting kernel. */
		trial_reason(c, "sandbox.crash", cls, seed, "candidate kernel failed: %s", c->cs.msg);
		c->cand_dead = 1;
		return;
	}
	if (rc) {
		internal_error(c, "talking to the candidate's runner: %s", e.msg);
		c->cand_dead = 1;
		return;
	}
	res->child_ns = r.elapsed_ns;
	res->tail_ns = r.info;
	if (r.rc) {
		if (!already_reported(c, "check.return_code", cls))
			trial_reason(c, "check.return_code", cls, seed, "kg_forward returned %d", r.rc);
		return;
	}
	res->ok = 1;
}

/* Checks that need no reference: guard bands, inputs, unwritten outputs. Returns 1 if any failed. */
static int integrity_checks(struct vctx *c, enum kg_input_class cls, uint64_t seed, const char *when)
{
	struct kg_arena *a = &c->ca;
	int failed = 0, slot, side;
	uint64_t dist;
	if (kg_arena_canary_check(a, &slot, &side, &dist)) {
		failed = 1;
		if (!already_reported(c, "check.canary", cls)) {
			const char *name = slot < c->task.n_inputs ? c->task.inputs[slot].name
								  : out_spec(c, slot - c->task.n_inputs)->name;
			struct kg_reason *r = trial_reason(c, "check.canary", cls, seed,
							   "%s: guard band %s '%s' overwritten, %llu bytes %s its %s", when,
							   side < 0 ? "before" : "after", name, (unsigned long long)dist,
							   side < 0 ? "before" : "past", side < 0 ? "start" : "end");
			snprintf(r->tensor, sizeof(r->tensor), "%s", name);
			r->index = (int64_t)dist;
		}
	}
	for (int i = 0; i < c->task.n_inputs; i++) {
		const struct kg_arena_slot *s = &a->slot[i];
		const unsigned char *got = kg_arena_ptr(a, i), *want = c->shadow[i];
		if (!memcmp(got, want, s->bytes))
			continue;
		failed = 1;
		if (already_reported(c, "check.input_modified", cls))
			continue;
		size_t es = kg_dtype_size(s->dtype), k = 0;
		while (k < s->bytes && got[k] == want[k])
			k++;
		struct kg_reason *r = trial_reason(c, "check.input_modified", cls, seed, "%s: input '%s' was modified", when,
						   c->task.inputs[i].name);
		snprintf(r->tensor, sizeof(r->tensor), "%s", c->task.inputs[i].name);
		r->index = (int64_t)(k / es);
		kg_index_str(r->index, s->shape, s->ndim, r->index_str, sizeof(r->index_str));
		r->has_values = 1;
		r->expected = kg_load(want, s->dtype, k / es);
		r->got = kg_load(got, s->dtype, k / es);
	}
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		int64_t idx = kg_arena_unwritten(a, s, c->refout[j]);
		if (idx < 0)
			continue;
		failed = 1;
		if (already_reported(c, "check.unwritten_output", cls))
			continue;
		struct kg_reason *r = trial_reason(c, "check.unwritten_output", cls, seed,
						   "%s: output '%s' was not written (first unwritten element shown)", when,
						   out_spec(c, j)->name);
		snprintf(r->tensor, sizeof(r->tensor), "%s", out_spec(c, j)->name);
		r->index = idx;
		kg_index_str(idx, a->slot[s].shape, a->slot[s].ndim, r->index_str, sizeof(r->index_str));
	}
	return failed;
}

/* Compares every output with the reference; code is check.mismatch, or check.stale_result while
 * timing. Returns 1 on a mismatch. */
static int compare_outputs(struct vctx *c, enum kg_input_class cls, uint64_t seed, const char *code, const char *when)
{
	int failed = 0;
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		const struct kg_arena_slot *sl = &c->ca.slot[s];
		struct kg_cmp cmp;
		if (!kg_compare(kg_arena_ptr(&c->ca, s), c->refout[j], sl->dtype, (size_t)sl->numel, c->atol_eff[j], c->rtol,
				&cmp))
			continue;
		failed = 1;
		const char *rc = code;
		if (!strcmp(code, "check.mismatch") && cmp.n_nan && cmp.first_nan == cmp.first_bad)
			rc = "check.nan";
		if (already_reported(c, rc, cls))
			continue;
		struct kg_reason *r = trial_reason(
			c, rc, cls, seed,
			"%s: output '%s': %lld of %lld elements outside atol=%g rtol=%g (%lld NaN, %lld Inf mismatches); "
			"max abs error %g, max rel error %g",
			when, out_spec(c, j)->name, (long long)cmp.n_bad, (long long)cmp.n, c->atol_eff[j], c->rtol,
			(long long)cmp.n_nan, (long long)cmp.n_inf, cmp.max_abs_err, cmp.max_rel_err);
		snprintf(r->tensor, sizeof(r->tensor), "%s", out_spec(c, j)->name);
		r->index = cmp.first_bad;
		kg_index_str(cmp.first_bad, sl->shape, sl->ndim, r->index_str, sizeof(r->index_str));
		r->has_values = 1;
		r->expected = cmp.first_bad_exp;
		r->got = cmp.first_bad_got;
	}
	return failed;
}

/* Would a constant (zero, or the output's mean) pass this trial? Then the trial is no evidence. */
static int trial_degenerate(struct vctx *c)
{
	for (int j = 0; j < c->task.n_outputs; j++) {
		const struct kg_arena_slot *sl = &c->ra.slot[c->task.n_inputs + j];
		double sum = 0;
		int64_t nfin = 0;
		for (int64_t i = 0; i < sl->numel; i++) {
			double x = kg_load(c->refout[j], sl->dtype, (size_t)i);
			if (isfinite(x)) {
				sum += x;
				nfin++;
			}
		}
		double consts[2] = {0.0, nfin ? sum / (double)nfin : 0.0};
		for (int k = 0; k < 2; k++) {
			int all = 1;
			for (int64_t i = 0; i < sl->numel && all; i++) {
				double x = kg_load(c->refout[j], sl->dtype, (size_t)i);
				all = isfinite(x) && fabs(consts[k] - x) <= c->atol_eff[j] + c->rtol * fabs(x);
			}
			if (!all)
				continue;
			/* One output that a constant passes is enough for a shortcut on that output. */
			return 1;
		}
	}
	return 0;
}

/* Why a wrong output is wrong, when the reason is a known shortcut: an output that is a copy of
 * an input, or that stays bit-identical while the inputs change. Only asked of trials that failed
 * the comparison (this one or the previous): an identity-like result that matches is no finding. */
static void shortcut_checks(struct vctx *c, enum kg_input_class cls, uint64_t seed, int mismatch)
{
	uint64_t in_hash = 0;
	for (int i = 0; i < c->task.n_inputs; i++)
		in_hash ^= content_hash(c->shadow[i], c->ca.slot[i].bytes) * (uint64_t)(i + 1);
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		const struct kg_arena_slot *sl = &c->ca.slot[s];
		const void *got = kg_arena_ptr(&c->ca, s);
		for (int i = 0; i < c->task.n_inputs && mismatch; i++) {
			if (c->ca.slot[i].bytes != sl->bytes || memcmp(got, c->shadow[i], sl->bytes))
				continue;
			if (!already_reported(c, "check.input_passthrough", cls)) {
				struct kg_reason *r = trial_reason(c, "check.input_passthrough", cls, seed,
								   "output '%s' is a copy of input '%s'", out_spec(c, j)->name,
								   c->task.inputs[i].name);
				snprintf(r->tensor, sizeof(r->tensor), "%s", out_spec(c, j)->name);
			}
		}
		uint64_t ch = content_hash(got, sl->bytes);
		if (c->have_prev && c->prev_in_hash != in_hash && c->prev_cand_hash[j] == ch && (mismatch || c->prev_mismatch) &&
		    !already_reported(c, "check.constant_output", cls)) {
			struct kg_reason *r = trial_reason(c, "check.constant_output", cls, seed,
							   "output '%s' is bit-identical for different inputs, and wrong",
							   out_spec(c, j)->name);
			snprintf(r->tensor, sizeof(r->tensor), "%s", out_spec(c, j)->name);
		}
		c->prev_cand_hash[j] = ch;
	}
	c->prev_in_hash = in_hash;
	c->prev_mismatch = mismatch;
	c->have_prev = 1;
}

/* Re-reads the outputs after a delay (and, on CUDA, a device-wide sync): anything that changed
 * was written after kg_forward returned. The outputs as they were at the return are put back, so
 * the other checks judge what the call itself delivered. */
static int async_check(struct vctx *c, enum kg_input_class cls, uint64_t seed)
{
	kg_error e = {0};
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		memcpy(c->snap[j], kg_arena_ptr(&c->ca, s), c->ca.slot[s].bytes);
	}
	uint32_t delay = (uint32_t)c->pol.async_delay_ms;
	int rc = kg_session_call(&c->cs, KG_OP_SETTLE, delay, NULL, NULL, &e);
	if (rc == KG_SESSION_ENDED) {
		cand_ended(c, "after kg_forward returned", cls, seed);
		return 1;
	}
	if (rc) {
		trial_reason(c, "check.async_escape", cls, seed, "the device failed while settling: %s", c->cs.msg);
		return 1;
	}
	int escaped = 0;
	for (int j = 0; j < c->task.n_outputs && !escaped; j++) {
		int s = c->task.n_inputs + j;
		const struct kg_arena_slot *sl = &c->ca.slot[s];
		const unsigned char *now = kg_arena_ptr(&c->ca, s), *before = c->snap[j];
		if (!memcmp(now, before, sl->bytes))
			continue;
		size_t k = 0, es = kg_dtype_size(sl->dtype);
		while (now[k] == before[k])
			k++;
		struct kg_reason *r = trial_reason(c, "check.async_escape", cls, seed,
						   "output '%s' changed %u ms after kg_forward returned: work escaped the call",
						   out_spec(c, j)->name, delay);
		snprintf(r->tensor, sizeof(r->tensor), "%s", out_spec(c, j)->name);
		r->index = (int64_t)(k / es);
		kg_index_str(r->index, sl->shape, sl->ndim, r->index_str, sizeof(r->index_str));
		r->has_values = 1;
		r->expected = kg_load(before, sl->dtype, k / es);
		r->got = kg_load(now, sl->dtype, k / es);
		escaped = 1;
	}
	for (int j = 0; j < c->task.n_outputs; j++) {
		int s = c->task.n_inputs + j;
		memcpy(kg_arena_ptr(&c->ca, s), c->snap[j], c->ca.slot[s].bytes);
	}
	return escaped;
}

/* Work left running on other streams when the call's own stream was done: it escaped the timer.
 * The bound leaves room for the synchronisation's own latency. */
static int tail_check(struct vctx *c, const struct cand_result *res, enum kg_input_class cls, uint64_t seed)
{
	if (res->tail_ns <= 200000 + res->child_ns / 10)
		return 0;
	if (!already_reported(c, "check.async_escape", cls))
		trial_reason(c, "check.async_escape", cls, seed,
			     "the device stayed busy %.3f ms after the candidate's stream finished (%.3f ms): work was "
			     "launched outside the given stream",
			     (double)res->tail_ns / 1e6, (double)res->child_ns / 1e6);
	return 1;
}

/* One correctness trial. The first of each class also asks whether the class is degenerate
 * (a property of the class and the task, not of the seed). */
static void run_trial(struct vctx *c, enum kg_input_class cls, uint64_t seed, int with_async, int first_of_class)
{
	uint64_t ref_ns;
	struct cand_result res;
	c->trial_no++;
	progress(c, "trial %d/%d: class %s, %s", c->trial_no, c->trial_total, kg_class_name(cls), c->cur_str);
	gen_inputs(c, cls, seed);
	if (ref_run(c, 0, &ref_ns))
		return;
	if (first_of_class) {
		c->n_class_checks++;
		if (trial_degenerate(c)) {
			c->degenerate_mask |= 1u << cls;
			c->n_degenerate++;
		}
	}
	c->n_trials++;
	cand_run(c, 0, cls, seed, &res);
	if (c->cand_dead)
		return;
	if (with_async && res.ok && (async_check(c, cls, seed) || c->cand_dead))
		return;
	integrity_checks(c, cls, seed, "after the call");
	int mismatch = res.ok && compare_outputs(c, cls, seed, "check.mismatch", "after the call");
	tail_check(c, &res, cls, seed);
	shortcut_checks(c, cls, seed, mismatch);
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void stats(double *ms, int n, struct kg_timing *t)
{
	memset(t, 0, sizeof(*t));
	if (n <= 0)
		return;
	qsort(ms, (size_t)n, sizeof(double), cmp_double);
	t->n = n;
	t->min_ms = ms[0];
	t->max_ms = ms[n - 1];
	t->median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
	t->p10_ms = ms[(int)floor(0.1 * (n - 1))];
	t->p90_ms = ms[(int)ceil(0.9 * (n - 1))];
	t->spread = t->median_ms > 0 ? (t->p90_ms - t->p10_ms) / t->median_ms : 0;
}

static double cpu_copy_gbps(void)
{
	size_t n = 64u << 20; /* well past any per-core cache, cheap to fault in */
	char *a = malloc(n), *b = malloc(n);
	double best = 0;
	if (!a || !b)
		goto out;
	memset(a, 1, n);
	memset(b, 2, n);
	for (int i = 0; i < 5; i++) {
		uint64_t t0 = kg_now_ns();
		memcpy(b, a, n);
		double s = secs_since(t0);
		a[i] = b[n - 1 - (size_t)i]; /* keep the copies observable */
		if (s > 0 && 2.0 * (double)n / s / 1e9 > best)
			best = 2.0 * (double)n / s / 1e9;
	}
out:
	free(a);
	free(b);
	return best;
}

static void run_timing(struct vctx *c)
{
	uint64_t t0 = kg_now_ns();
	int n = c->o->iterations >= 0 ? c->o->iterations : c->pol.iterations;
	int w = c->pol.warmup;
	if (n <= 0) {
		kg_verdict_add_check(c->v, "timing", KG_CHECK_SKIP, 0, "no timed iterations requested");
		return;
	}
	double *cms = calloc((size_t)n, sizeof(double)), *rms = calloc((size_t)n, sizeof(double));
	double *pms = calloc((size_t)n, sizeof(double)), *gap = calloc((size_t)n, sizeof(double));
	kg_error e = {0};
	if (!cms || !rms || !pms || !gap) {
		internal_error(c, "out of memory for timing");
		goto out;
	}
	/* Timing is at the base shape, whatever shape the correctness trials ended on. */
	if (set_shape(c, 0, &e) || kg_session_setup(&c->rs, &e) || kg_session_setup(&c->cs, &e)) {
		if (c->cs.ended)
			cand_ended(c, "while setting up the timing", KG_CLASS_NORMAL, 0);
		else
			internal_error(c, "setting up the timing shape: %s", e.msg[0] ? e.msg : c->rs.msg);
		goto out;
	}
	int impossible = -1;
	uint64_t ref_ns;
	struct cand_result res;
	for (int i = -w; i < n && !c->cand_dead && !c->v->internal_error[0]; i++) {
		/* Every iteration, warm-up included, sees inputs nobody has seen before: a result cached by
		 * pointer or by content cannot be served, and the re-check catches a stale one. */
		uint64_t seed = kg_seed_derive(c->master, 0x74696d65000ull + (uint64_t)(i + w));
		progress(c, "timing %d/%d", i < 0 ? 0 : i + 1, n);
		gen_inputs(c, KG_CLASS_NORMAL, seed);
		if (ref_run(c, 1, &ref_ns))
			break;
		cand_run(c, 1, KG_CLASS_NORMAL, seed, &res);
		if (c->cand_dead)
			break;
		int failed = integrity_checks(c, KG_CLASS_NORMAL, seed, "during timing");
		if (res.ok)
			failed |= compare_outputs(c, KG_CLASS_NORMAL, seed, "check.stale_result", "during timing");
		failed |= tail_check(c, &res, KG_CLASS_NORMAL, seed);
		if (failed || !res.ok)
			break;
		if (i < 0)
			continue;
		rms[i] = (double)ref_ns / 1e6;
		cms[i] = (double)res.child_ns / 1e6;
		pms[i] = (double)res.parent_ns / 1e6;
		/* The runner's clock runs inside the parent's round trip: a claim longer than the trip is
		 * impossible, and one much shorter than it hides work outside the measured region. */
		if (res.child_ns > res.parent_ns + 20000 && impossible < 0)
			impossible = i;
		/* What the parent's clock saw from RUN to the outputs being back, beyond the claim, the
		 * device's tail, the copy back (as the trusted runner needed it) and the channel: work
		 * hidden from the claim shows in every call, scheduling noise only in some, so the
		 * smallest share decides, and it must be both large and most of the span. */
		double g = (double)res.span_ns - (double)c->cs.nop_ns - (double)c->ref_download_ns - (double)res.child_ns -
			   (double)res.tail_ns;
		gap[i] = g < 1e6 ? 0 : g / (double)res.span_ns;
	}
	if (c->cand_dead || c->v->internal_error[0] || c->v->n_reasons)
		goto out;
	stats(cms, n, &c->v->cand);
	stats(rms, n, &c->v->ref);
	double pmed;
	{
		struct kg_timing pt;
		stats(pms, n, &pt);
		pmed = pt.median_ms;
		c->v->cand.parent_median_ms = pmed;
	}
	struct kg_timing gt;
	stats(gap, n, &gt);
	int tampered = 1;
	if (impossible >= 0) {
		kg_verdict_add_reason(c->v, "timing.tampered",
				      "the candidate's runner claimed a call took longer than the parent's round trip "
				      "(iteration %d): its timing channel is forged",
				      impossible);
	} else if (c->cs.forged) {
		kg_verdict_add_reason(c->v, "timing.tampered",
				      "%u message(s) on the runner's control channel answered no pending command: something "
				      "in the candidate's process forged the result channel",
				      c->cs.forged);
	} else if (gt.min_ms > 0.5) {
		kg_verdict_add_reason(c->v, "timing.tampered",
				      "the candidate's runner claimed %.3f ms per call while the parent measured %.3f ms "
				      "round trips (channel overhead %.3f ms) in every call: work is hidden outside the "
				      "timed region",
				      c->v->cand.median_ms, pmed, (double)c->cs.nop_ns / 1e6);
	} else {
		tampered = 0;
	}
	if (tampered) {
		/* A forged claim makes every derived figure meaningless: report the parent's view only. */
		kg_verdict_add_check(c->v, "timing", KG_CHECK_FAIL, secs_since(t0),
				     "the runner's time claims contradict the parent's clock (parent median %.4f ms)", pmed);
		goto out;
	}
	c->v->timed = 1;
	c->v->speedup = c->v->cand.median_ms > 0 ? c->v->ref.median_ms / c->v->cand.median_ms : 0;
	double bytes = 0, flops = 0;
	kg_task_cost(&c->task, c->task.cost_bytes, &c->shapes[0], &bytes);
	kg_task_cost(&c->task, c->task.cost_flops, &c->shapes[0], &flops);
	c->v->bytes = bytes;
	c->v->flops = flops;
	if (c->v->cand.median_ms > 0) {
		c->v->cand_gbps = bytes / (c->v->cand.median_ms * 1e-3) / 1e9;
		c->v->cand_gflops = flops / (c->v->cand.median_ms * 1e-3) / 1e9;
	}
	/* The ceiling comes from the trusted side: the reference's runner on the GPU, the parent on
	 * the CPU. */
	if (c->is_cuda && c->ref_is_cuda)
		c->gpu.copy_gbps = (double)c->rs.ceiling_mbps / 1000.0;
	c->v->ceiling_gbps = c->is_cuda ? c->gpu.copy_gbps : cpu_copy_gbps();
	if (c->v->ceiling_gbps > 0 && bytes > 0)
		c->v->roofline = c->v->cand_gbps / c->v->ceiling_gbps;
	if (c->pol.min_speedup > 0 && c->v->speedup < c->pol.min_speedup)
		kg_verdict_add_reason(c->v, "timing.too_slow", "speedup %.3fx over the reference is below the policy's gate %.3fx",
				      c->v->speedup, c->pol.min_speedup);
	kg_verdict_add_check(c->v, "timing", KG_CHECK_PASS, secs_since(t0),
			     "candidate median %.4f ms (spread %.1f%%), reference %.4f ms, speedup %.3fx%s",
			     c->v->cand.median_ms, 100 * c->v->cand.spread, c->v->ref.median_ms, c->v->speedup,
			     c->v->cand.spread > c->pol.max_spread ? " (noisy: spread above the policy's bound)" : "");
out:
	c->v->t_timing_s = secs_since(t0);
	free(cms);
	free(rms);
	free(pms);
	free(gap);
}

/* ---- the whole protocol ---- */

static int resolve_setup(struct vctx *c, kg_error *e)
{
	const struct kg_verify_opts *o = c->o;
	int rc;
	if (o->policy) {
		rc = kg_policy_find(o->policy, &c->pol, e);
	} else {
		rc = kg_policy_find("default", &c->pol, e);
		if (rc == -ENOENT) {
			kg_policy_defaults(&c->pol);
			rc = 0;
		}
	}
	if (rc)
		return rc;
	if ((rc = kg_task_find(o->task, &c->task, e)))
		return rc;
	if (access(o->candidate, R_OK))
		return kg_err(e, -ENOENT, "candidate %s: %s", o->candidate, strerror(errno));
	const char *ext = strrchr(o->candidate, '.');
	c->backend = o->backend ? o->backend : ext && !strcmp(ext, ".cu") ? "cuda" : "cpu";
	if (strcmp(c->backend, "cpu") && strcmp(c->backend, "cuda"))
		return kg_err(e, -EINVAL, "unknown backend '%s' (cpu, cuda)", c->backend);
	c->is_cuda = !strcmp(c->backend, "cuda");
	c->ref_backend = o->reference_backend ? o->reference_backend : c->backend;
	if (strcmp(c->ref_backend, "cpu") && strcmp(c->ref_backend, "cuda"))
		return kg_err(e, -EINVAL, "unknown reference backend '%s' (cpu, cuda)", c->ref_backend);
	c->ref_is_cuda = !strcmp(c->ref_backend, "cuda");
	if (c->ref_is_cuda && !c->task.ref_cuda[0])
		return kg_err(e, -EINVAL, "task '%s' has no CUDA reference", c->task.name);
	for (int i = 0; i < o->n_flags; i++)
		if (!kg_policy_flag_allowed(&c->pol, o->flags[i]))
			return kg_err(e, -EPERM, "compiler flag '%s' is not allowed by the policy", o->flags[i]);
	if (o->trials > 0)
		c->pol.trials = o->trials;
	if (o->shapes_mode) {
		if (!strcmp(o->shapes_mode, "nominal"))
			c->pol.shapes = KG_SHAPES_NOMINAL;
		else if (!strcmp(o->shapes_mode, "variants"))
			c->pol.shapes = KG_SHAPES_VARIANTS;
		else
			return kg_err(e, -EINVAL, "--shapes: expected nominal or variants, got '%s'", o->shapes_mode);
	}
	const char *set = o->shape_set ? o->shape_set : c->pol.shape_set;
	const struct kg_shapeset *ss = kg_task_shapeset(&c->task, set);
	if (!ss)
		return kg_err(e, -EINVAL, "task '%s' has no shape set '%s'", c->task.name, set);
	c->shapes[0] = ss->dims;
	c->n_shapes = 1;
	if (c->pol.shapes == KG_SHAPES_VARIANTS)
		for (int i = 0; i < c->task.n_variants; i++)
			kg_task_variant_dims(&c->task, &ss->dims, i, &c->shapes[c->n_shapes++]);
	kg_policy_tolerance(&c->pol, c->task.atol, c->task.rtol, c->task.rms_tol, &c->atol, &c->rtol, &c->rms_tol);

	struct kg_verdict *v = c->v;
	snprintf(v->task, sizeof(v->task), "%s", c->task.name);
	snprintf(v->candidate, sizeof(v->candidate), "%s", o->candidate);
	snprintf(v->backend, sizeof(v->backend), "%s", c->backend);
	snprintf(v->policy, sizeof(v->policy), "%s", c->pol.path[0] ? c->pol.path : "(built-in defaults)");
	snprintf(v->shape_set, sizeof(v->shape_set), "%s", set);
	kg_dims_str(&c->shapes[0], v->dims, sizeof(v->dims));

	c->limits.wall_s = c->pol.wall_s;
	c->limits.cpu_s = c->pol.cpu_s;
	c->limits.nproc = c->pol.nproc;
	c->limits.mem_bytes = c->pol.memory_bytes;
	return 0;
}

static int alloc_buffers(struct vctx *c, kg_error *e)
{
	const struct kg_task *t = &c->task;
	uint64_t maxb[2 * MAX_T] = {0}, layout_max = 0;
	for (int s = 0; s < c->n_shapes; s++) {
		uint64_t b[2 * MAX_T];
		for (int i = 0; i < t->n_inputs + t->n_outputs; i++) {
			const struct kg_tensor_spec *sp = i < t->n_inputs ? &t->inputs[i] : &t->outputs[i - t->n_inputs];
			int64_t shape[KG_MAX_DIMS];
			int rc = kg_task_shape(sp, &c->shapes[s], shape, e);
			if (rc)
				return rc;
			b[i] = (uint64_t)kg_shape_numel(sp->ndim, shape) * kg_dtype_size(sp->dtype);
			if (b[i] > maxb[i])
				maxb[i] = b[i];
		}
		uint64_t need = kg_arena_size_for(b, t->n_inputs + t->n_outputs);
		if (need > layout_max)
			layout_max = need;
	}
	for (int i = 0; i < t->n_inputs; i++)
		if (!(c->shadow[i] = malloc(maxb[i] ? maxb[i] : 1)))
			return kg_err(e, -ENOMEM, "out of memory for inputs (%llu bytes)", (unsigned long long)maxb[i]);
	for (int j = 0; j < t->n_outputs; j++) {
		uint64_t b = maxb[t->n_inputs + j] ? maxb[t->n_inputs + j] : 1;
		if (!(c->refout[j] = malloc(b)) || !(c->snap[j] = malloc(b)))
			return kg_err(e, -ENOMEM, "out of memory for outputs (%llu bytes)", (unsigned long long)b);
	}
	int rc = kg_arena_create(&c->ra, layout_max, e);
	if (!rc)
		rc = kg_arena_create(&c->ca, layout_max, e);
	return rc;
}

static void start_sessions(struct vctx *c)
{
	kg_error e = {0};
	struct kg_session_opts so = {
		.backend = c->backend,
		.limits = c->limits,
		.required_layers = c->pol.required_layers,
		.disabled_layers = c->o->disabled_layers,
		.call_timeout_s = 60,
	};
	if (getenv("KGATE_SANITIZE"))
		so.limits.mem_bytes = 0; /* ASan reserves terabytes of shadow: no address-space bound */
	/* Reference: trusted code, same sandbox; threads allowed (a reference may use them). */
	so.so_path = c->ref_so;
	so.backend = c->ref_backend;
	so.threads = 1;
	int rc = kg_session_start(&c->rs, &so, &c->ra, &e);
	c->rs_up = 1;
	if (rc) {
		ref_failed(c, rc, &e, "starting");
		return;
	}
	so.so_path = c->cand_so;
	so.backend = c->backend;
	so.threads = c->pol.threads;
	rc = kg_session_start(&c->cs, &so, &c->ca, &e);
	c->cs_up = 1;
	char layers[256];
	kg_sb_layers_str(kg_sb_layers_active(c->cs.sb ? c->cs.sb : c->rs.sb), layers, sizeof(layers));
	snprintf(c->v->layers_active, sizeof(c->v->layers_active), "%s", layers);
	if (rc == KG_SESSION_ENDED) {
		cand_ended(c, "while loading", KG_CLASS_NORMAL, 0);
		c->v->reasons[c->v->n_reasons - 1].has_seed = 0;
		c->v->reasons[c->v->n_reasons - 1].input_class[0] = '\0';
	} else if (rc == KG_SESSION_FAILED) {
		kg_verdict_add_reason(c->v, "load.error", "the candidate could not be loaded: %s", c->cs.msg);
		c->cand_dead = 1;
	} else if (rc) {
		if (rc == -EPERM)
			kg_verdict_add_reason(c->v, "sandbox.setup", "%s", e.msg);
		else
			internal_error(c, "starting the candidate: %s", e.msg);
		c->cand_dead = 1;
	}
}

static void correctness(struct vctx *c)
{
	uint64_t t0 = kg_now_ns();
	unsigned classes = c->pol.classes & ~c->task.classes_excluded;
	if (!c->task.nonfinite)
		classes &= ~(1u << KG_CLASS_SPECIAL);
	int per_base = 0;
	for (int k = 0; k < KG_CLASS_COUNT_; k++)
		per_base += (classes >> k & 1) * c->pol.trials;
	c->trial_total = per_base + (c->n_shapes - 1) * 2;
	uint64_t trial_seq = 0;
	kg_error e = {0};
	for (int s = 0; s < c->n_shapes && !c->cand_dead && !c->v->internal_error[0]; s++) {
		int reasons_before = c->v->n_reasons;
		if (set_shape(c, s, &e) || kg_session_setup(&c->rs, &e) || kg_session_setup(&c->cs, &e)) {
			if (c->cs.ended)
				cand_ended(c, "while setting up", KG_CLASS_NORMAL, 0);
			else
				internal_error(c, "setting up shape %s: %s", c->cur_str, e.msg[0] ? e.msg : c->rs.msg);
			break;
		}
		int first = 1;
		for (int k = 0; k < KG_CLASS_COUNT_ && !c->cand_dead && !c->v->internal_error[0]; k++) {
			if (!(classes >> k & 1))
				continue;
			/* Variant shapes get fewer trials: they test coverage, the base shape tests values. */
			int nt = s == 0 ? c->pol.trials : (k == KG_CLASS_NORMAL || k == KG_CLASS_UNIFORM) ? 1 : 0;
			for (int t = 0; t < nt && !c->cand_dead && !c->v->internal_error[0]; t++) {
				uint64_t seed = kg_seed_derive(c->master, ++trial_seq);
				run_trial(c, (enum kg_input_class)k, seed, first, s == 0 && t == 0);
				first = 0;
			}
		}
		if (s > 0) {
			/* A failure that only shows at another shape is its own finding. */
			for (int i = reasons_before; i < c->v->n_reasons; i++) {
				struct kg_reason *r = &c->v->reasons[i];
				if (!strcmp(r->code, "check.mismatch") || !strcmp(r->code, "check.unwritten_output") ||
				    !strcmp(r->code, "check.nan")) {
					char msg[sizeof(r->message)];
					snprintf(msg, sizeof(msg), "at shape %s (not the base shape): %s", c->cur_str, r->message);
					snprintf(r->message, sizeof(r->message), "%s", msg);
					snprintf(r->code, sizeof(r->code), "check.shape_variant");
				}
			}
		}
	}
	int failed = c->v->n_reasons > 0;
	kg_verdict_add_check(c->v, "correctness", failed ? KG_CHECK_FAIL : KG_CHECK_PASS, secs_since(t0),
			     "%d trials over %d shapes, atol=%g rtol=%g rms=%g (precision %s)", c->n_trials, c->n_shapes,
			     c->atol, c->rtol, c->rms_tol, kg_precision_name(c->pol.precision));
	c->v->trials_run = c->n_trials;
	size_t len = 0;
	for (int k = 0; k < KG_CLASS_COUNT_; k++)
		if (c->degenerate_mask >> k & 1)
			len += (size_t)snprintf(c->v->degenerate_classes + len, sizeof(c->v->degenerate_classes) - len,
						"%s%s", len ? "," : "", kg_class_name((enum kg_input_class)k));
	if (!failed && c->n_class_checks > 0 && c->n_degenerate == c->n_class_checks)
		kg_verdict_add_reason(c->v, "check.degenerate",
				      "every trial's reference output is near-constant under the tolerance: the trials "
				      "cannot tell a real kernel from a constant");
	c->v->t_checks_s = secs_since(t0);
}

/* ---- compute-sanitizer runs ---- */

/* One run of the candidate under a compute-sanitizer tool, on every shape of the set, with exact
 * per-tensor allocations so that the tool sees each buffer's true end (the guard bands of the
 * checked runs sit inside one allocation, where a read past a tensor is invisible to it). The
 * tool's exit status decides; its report supplies the details. */
static void sanitized_run(struct vctx *c, enum kg_sanitizer_tool tool)
{
	uint64_t t0 = kg_now_ns();
	const char *name = kg_sanitizer_tool_name(tool);
	char code[40], prefix[48], msg[900];
	snprintf(code, sizeof(code), "check.%s", name);
	uint64_t token = 0;
	kg_seed_fresh(&token);
	/* a prefix the candidate cannot predict, so it cannot print a report of its own making */
	snprintf(prefix, sizeof(prefix), "=kgate-%016llx=", (unsigned long long)token);
	const char *argv[KG_SANITIZER_MAX_ARGS];
	kg_sanitizer_argv(tool, c->sanitizer, prefix, argv);
	struct kg_session ss;
	kg_error e = {0};
	struct kg_session_opts so = {
		.backend = "cuda",
		.so_path = c->cand_so,
		.limits = c->limits,
		.required_layers = c->pol.required_layers,
		.disabled_layers = c->o->disabled_layers,
		.threads = c->pol.threads,
		.call_timeout_s = 120,
		.tool_argv = argv,
	};
	/* the tool's own descriptors and a report that must survive the candidate's chatter */
	so.limits.nofile = 1024;
	so.limits.output_keep = 1u << 20;
	so.limits.wall_s = c->limits.wall_s > 600 ? c->limits.wall_s : 600;
	so.limits.cpu_s = 0;
	progress(c, "%s run", name);
	int rc = kg_session_start(&ss, &so, &c->ca, &e);
	int completed = 0, shape = 0;
	const char *during = "while loading";
	for (; !rc && shape < c->n_shapes; shape++) {
		if ((rc = set_shape(c, shape, &e)) < 0 || (rc = kg_session_setup(&ss, &e)))
			break;
		uint64_t seed = kg_seed_derive(c->master, 0x73616e0000ull + (uint64_t)tool * 64 + (uint64_t)shape);
		gen_inputs(c, KG_CLASS_NORMAL, seed);
		cand_arena_ready(c, seed);
		struct kg_wire_reply r;
		during = "during kg_forward";
		if ((rc = kg_session_call(&ss, KG_OP_UPLOAD, 0, NULL, NULL, &e)) ||
		    (rc = kg_session_call(&ss, KG_OP_RUN, 0, &r, NULL, &e)) ||
		    (rc = kg_session_call(&ss, KG_OP_DOWNLOAD, 0, NULL, NULL, &e)))
			break;
	}
	if (!rc)
		completed = 1;
	const char *at = shape < c->n_shapes ? c->cur_str : "";
	char at_str[160];
	snprintf(at_str, sizeof(at_str), "%s%s", at[0] ? " at shape " : "", at);
	char fail_msg[sizeof(ss.msg)];
	snprintf(fail_msg, sizeof(fail_msg), "%s", rc == KG_SESSION_FAILED ? ss.msg : e.msg);
	kg_session_close(&ss);
	const struct kg_sb_outcome *o = &ss.outcome;
	double secs = secs_since(t0);
	const char *log = getenv("KGATE_TOOL_LOG"); /* development aid: the tool's whole output */
	FILE *lf = log && *log && o->output ? fopen(log, "a") : NULL;
	if (lf) {
		fprintf(lf, "--- %s on %s (end %d, exit %d)\n%s\n", name, c->o->candidate, o->end, o->exit_code, o->output);
		fclose(lf);
	}
	if (o->end == KG_SB_END_EXIT && o->exit_code == KG_SANITIZER_ERROR_EXIT) {
		kg_sanitizer_first_error(o->output, prefix, msg, sizeof(msg));
		kg_verdict_add_reason(c->v, code, "compute-sanitizer %s found errors%s: %s", name, at_str, msg);
		kg_verdict_add_check(c->v, name, KG_CHECK_FAIL, secs, "errors%s: %s", at_str, msg);
	} else if (completed && o->end == KG_SB_END_EXIT && o->exit_code == 0) {
		kg_verdict_add_check(c->v, name, KG_CHECK_PASS, secs, "compute-sanitizer %s: no errors over %d shapes",
				     name, c->n_shapes);
	} else if (rc == KG_SESSION_ENDED && o->end != KG_SB_END_EXIT && o->end != KG_SB_END_KILLED &&
		   o->end != KG_SB_END_TIMEOUT) {
		/* The sandbox ended it (a denied call, memory, a crash): the candidate's process did it.
		 * Running out of time is left to the branch below: the tool slows every kernel by a
		 * large factor, and a candidate that passed its timed runs is not judged by that. */
		char what[700];
		describe_end(o, what, sizeof(what));
		kg_verdict_add_reason(c->v, kg_sb_end_reason(o->end), "candidate %s under compute-sanitizer %s%s: %s",
				      during, name, at_str, what);
		kg_verdict_add_check(c->v, name, KG_CHECK_FAIL, secs, "%s", what);
	} else {
		/* The tool itself failed (no device support, a lost connection, too slow at these
		 * shapes): kgate cannot say, and says so (exit 3, never an acceptance). */
		char what[700];
		describe_end(o, what, sizeof(what));
		const char *out = o->output ? o->output : "";
		size_t n = strlen(out);
		internal_error(c, "the compute-sanitizer %s run failed%s (%s; %s%s): %.300s", name, at_str, what,
			       completed ? "" : "runner: ", completed ? "the runs completed" : fail_msg,
			       n > 300 ? out + n - 300 : out);
	}
	kg_session_free(&ss);
}

static void sanitized_runs(struct vctx *c)
{
	/* The checked sessions are done; their processes go first, so the GPU and the arena are the
	 * sanitized run's alone. */
	if (c->cs_up)
		kg_session_close(&c->cs);
	if (c->rs_up)
		kg_session_close(&c->rs);
	for (int t = 0; t < KG_SAN_COUNT_ && !c->v->n_reasons && !c->v->internal_error[0]; t++)
		if (c->pol.compute_sanitizer >> t & 1)
			sanitized_run(c, (enum kg_sanitizer_tool)t);
}

int kg_verify(const struct kg_verify_opts *o, struct kg_verdict *v, kg_error *e)
{
	struct vctx *c = calloc(1, sizeof(*c));
	uint64_t t_start = kg_now_ns();
	int rc;
	if (!c)
		return kg_err(e, -ENOMEM, "out of memory");
	c->o = o;
	c->v = v;
	c->ra.fd = c->ca.fd = -1;
	c->progress = o->progress;
	kg_verdict_init(v);
	if ((rc = resolve_setup(c, e)))
		goto out;
	if (o->has_seed)
		c->master = o->seed;
	else if ((rc = kg_seed_fresh(&c->master))) {
		kg_err(e, rc, "getrandom: %s", strerror(-rc));
		goto out;
	}
	v->master_seed = c->master;

	if (c->is_cuda || c->ref_is_cuda) {
		kg_gpu_probe(&c->gpu);
		snprintf(v->device, sizeof(v->device), "%s", c->gpu.present ? c->gpu.name : "no GPU");
		if (!c->gpu.present && c->pol.gpu_required) {
			internal_error(c, "no GPU: %s (the policy requires one)", c->gpu.why);
			goto finish;
		}
		if (c->is_cuda && c->gpu.present && c->pol.compute_sanitizer &&
		    kg_path_compute_sanitizer(c->sanitizer, sizeof(c->sanitizer))) {
			internal_error(c, "the policy asks for compute-sanitizer runs, and none was found (looked under "
					  "$CUDA_HOME and /usr/local/cuda; set KGATE_COMPUTE_SANITIZER)");
			goto finish;
		}
	} else {
		snprintf(v->device, sizeof(v->device), "cpu");
	}
	if ((rc = make_workdir(c, e)))
		goto out;
	if ((rc = alloc_buffers(c, e)))
		goto out;

	progress(c, "compiling");
	struct kg_compile_result cr;
	uint64_t t0 = kg_now_ns();
	kg_error ce = {0};
	const char *ref_src = c->ref_is_cuda ? c->task.ref_cuda : c->task.ref_c;
	if (compile_one(c, ref_src, "ref", c->ref_is_cuda, c->ref_so, sizeof(c->ref_so), &cr, NULL, 0,
			c->ref_is_cuda ? (const char(*)[32])c->task.ref_libs : NULL, c->ref_is_cuda ? c->task.n_ref_libs : 0,
			&ce) ||
	    !cr.ok) {
		if (ce.code == -EPERM)
			kg_verdict_add_reason(v, "sandbox.setup", "compile: %s", ce.msg);
		else
			internal_error(c, "compiling the reference %s failed: %s", ref_src, ce.msg[0] ? ce.msg : cr.log);
		goto finish;
	}
	if (compile_one(c, o->candidate, "cand", c->is_cuda, c->cand_so, sizeof(c->cand_so), &cr, o->flags, o->n_flags,
			NULL, 0, &ce)) {
		if (ce.code == -EPERM)
			kg_verdict_add_reason(v, "sandbox.setup", "compile: %s", ce.msg);
		else
			internal_error(c, "compiling the candidate: %s", ce.msg);
		goto finish;
	}
	v->t_compile_s = secs_since(t0);
	snprintf(v->compile_log, sizeof(v->compile_log), "%s", cr.log);
	if (!cr.ok) {
		const char *code = kg_sb_end_reason(cr.outcome.end);
		char what[700];
		describe_end(&cr.outcome, what, sizeof(what));
		if (code && cr.outcome.end != KG_SB_END_EXIT)
			kg_verdict_add_reason(v, code, "compile: %s", what);
		kg_verdict_add_reason(v, "compile.error", "the candidate does not compile (%s); see the compile log", what);
		kg_verdict_add_check(v, "compile", KG_CHECK_FAIL, cr.seconds, "%s", what);
		goto finish;
	}
	kg_verdict_add_check(v, "compile", KG_CHECK_PASS, cr.seconds, "built in %.2f s", cr.seconds);

	static_check(c);
	if (v->n_reasons || v->internal_error[0])
		goto finish;
	if (c->is_cuda && !c->gpu.present) {
		/* Only reachable when the policy says a GPU is optional: compile and static checks ran,
		 * the runtime checks could not, and the report says so. */
		kg_verdict_add_check(v, "runtime", KG_CHECK_SKIP, 0, "no GPU (%s): runtime checks skipped", c->gpu.why);
		goto finish;
	}

	progress(c, "starting the sandboxes");
	t0 = kg_now_ns();
	start_sessions(c);
	v->t_reference_s = secs_since(t0);
	if (!c->cand_dead && !v->internal_error[0])
		correctness(c);
	if (!c->cand_dead && !v->internal_error[0] && !v->n_reasons)
		run_timing(c);
	else
		kg_verdict_add_check(v, "timing", KG_CHECK_SKIP, 0, "skipped: the candidate failed its checks");
	if (c->is_cuda && c->pol.compute_sanitizer && !c->cand_dead && !v->internal_error[0] && !v->n_reasons)
		sanitized_runs(c);
	else if (!c->is_cuda && c->pol.compute_sanitizer)
		kg_verdict_add_check(v, "compute-sanitizer", KG_CHECK_SKIP, 0,
				     "the policy's compute-sanitizer runs apply to CUDA candidates only");
	if (c->cs_up && c->cs.forged && !kg_verdict_has_reason(v, "timing.tampered"))
		kg_verdict_add_reason(v, "timing.tampered",
				      "%u message(s) on the runner's control channel answered no pending command: something "
				      "in the candidate's process forged the result channel",
				      c->cs.forged);

finish:
	if (c->cs_up)
		kg_session_close(&c->cs);
	if (c->rs_up)
		kg_session_close(&c->rs);
	if (c->cs_up && c->cs.sb) {
		char fl[256];
		kg_sb_layers_str(c->cs.outcome.layers_failed, fl, sizeof(fl));
		snprintf(v->layers_failed, sizeof(v->layers_failed), "%s", fl);
	}
	if (c->progress)
		fprintf(stderr, "\r\033[K");
	v->t_total_s = secs_since(t_start);
	kg_verdict_finish(v);
	rc = 0;
out:
	if (c->cs_up)
		kg_session_free(&c->cs);
	if (c->rs_up)
		kg_session_free(&c->rs);
	kg_arena_destroy(&c->ra);
	kg_arena_destroy(&c->ca);
	for (int i = 0; i < MAX_T; i++) {
		free(c->shadow[i]);
		free(c->refout[i]);
		free(c->snap[i]);
	}
	if (c->work[0] && !o->keep_workdir)
		kg_rmtree(c->work);
	else if (c->work[0] && c->progress)
		fprintf(stderr, "[kgate] work directory kept: %s\n", c->work);
	free(c);
	return rc;
}

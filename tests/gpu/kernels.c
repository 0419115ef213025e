/* kgate-device's own kernels agree with the host's code. The inputs it draws on the GPU are the
 * host's, bit for bit: every class of every dtype at shapes that end mid-block and mid-row and at a
 * gigabyte-class one, drawn by the real keeper's kernel (a START of one GEN range, read back
 * through END's snapshot) and by the host's fill (verifier/plan/inputs.c). END's comparison of the
 * inputs on the device leaves the host arena's copy alone when they are as staged. Its judgement
 * of an output (CHECK) gives kg_compare's verdict, indices and maxima, the sums to rounding, with
 * and without row factors, and STATS the reference's finite sum and poison. Its gated calls
 * (device/wire.h's gate page), with this program playing the runner from the CPU: the clock waits
 * for ARMED, a set is released only after the set before it was marked done, what never came is
 * named, the flush is timed; printed: how soon a release reaches the CPU. Exits 77 (skipped)
 * without a driver; with --require, a keeper without its kernels or its gated calls fails.
 * --gate: the gated calls alone. --hog: the quiet-device probe alone, against work of another
 * context (this program's own, kept busy while the keeper times its flush: busy beside it, quiet
 * after). Usage: gpu-kernels [--require] [--gate | --hog] [KGATE-DEVICE] */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kg_cudrv.h"
#include "device/judge.h"
#include "verifier/session/keeper.h"
#include "verifier/judge/compare.h"
#include "verifier/plan/dtype.h"
#include "verifier/plan/inputs.h"
#include "verifier/judge/clock.h"

#define ARENA ((size_t)288 << 20)

static int failures;

static void fail(const char *fmt, const char *a, const char *b, long long i)
{
	fprintf(stderr, "FAIL ");
	fprintf(stderr, fmt, a, b, i);
	fputc('\n', stderr);
	failures++;
}

/* one draw on the device and on the host, compared */
static int one(struct kg_keeper *k, int slot, unsigned char *host, unsigned char *mine, kg_dtype dt,
	       enum kg_input_class c, const int64_t *shape, int ndim, const kg_key *key)
{
	size_t n = 1, es = kg_dtype_size(dt);
	for (int d = 0; d < ndim; d++)
		n *= (size_t)shape[d];
	size_t bytes = n * es;
	if (bytes > ARENA)
		return -1;
	struct kg_keeper_stage st = {.n = 1, .range = {{.off = 0, .bytes = bytes, .kind = KG_DEV_R_GEN}}};
	kg_inputs_params(&st.range[0].gen, dt, n, shape, ndim, KG_ROLE_ACTIVATION, c, KG_CLASS_ALL, key, 3);
	memcpy(st.key, key->w, sizeof(st.key));
	kg_error e = {0};
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed;
	memset(host, 0xab, bytes);
	if (kg_keeper_begin(k, slot, bytes, 0, &st, &t0, &e) ||
	    kg_keeper_end(k, slot, bytes, 0, bytes, 0, 0, &ed, &e)) {
		fail("%s %s: the keeper failed (%lld)", kg_class_name(c), e.msg, 0);
		return -1;
	}
	kg_inputs_fill_tensor(mine, &st.range[0].gen, key);
	if (memcmp(host, mine, bytes)) {
		size_t i = 0;
		while (!memcmp(host + i * es, mine + i * es, es))
			i++;
		fprintf(stderr, "  element %zu: device %.17g, host %.17g\n", i, kg_load(host, dt, i), kg_load(mine, dt, i));
		fail("%s %s: the device's draw differs from the host's, first at element %lld", kg_class_name(c),
		     kg_dtype_name(dt), (long long)i);
	}
	return 0;
}

/* An output of every kind of element (compare.c's rules): within the bound, outside it, NaN on
 * either side or both, Inf mismatched and matched, a row factor's worth off. */
static void fill_pair(float *x, float *g, size_t n, uint64_t st)
{
	for (size_t i = 0; i < n; i++) {
		st = st * 6364136223846793005ull + 1442695040888963407ull;
		double v = (double)(st >> 11) * 0x1.0p-53 * 4 - 2, w = v * (1.0 + 3e-6 * ((st >> 7 & 255) / 255.0 - 0.5));
		int kind = (int)((st >> 40) % 100003);
		if (kind == 0)
			w = v + 0.5;
		else if (kind == 1)
			w = (double)NAN;
		else if (kind == 2)
			v = w = (double)NAN;
		else if (kind == 3)
			w = (double)INFINITY;
		else if (kind < 200)
			w = v * 1.0001;
		x[i] = (float)v;
		g[i] = (float)w;
	}
}

/* the device's CHECK against kg_compare, on outputs staged through two attached arenas */
static void judge(struct kg_keeper *k, int ref, void *rh, int cand, void *ch, size_t n, int64_t row, double atol)
{
	kg_error e = {0};
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed;
	size_t bytes = n * 4;
	fill_pair(rh, ch, n, 0x5eedull + n + (uint64_t)row);
	if (kg_keeper_begin(k, ref, bytes, 0, NULL, &t0, &e) || kg_keeper_end(k, ref, bytes, 0, bytes, 0, 1, &ed, &e) ||
	    kg_keeper_begin(k, cand, bytes, 0, NULL, &t0, &e) || kg_keeper_end(k, cand, bytes, 0, bytes, 0, 1, &ed, &e)) {
		fail("judge: staging failed: %s%s%lld", e.msg, "", 0);
		return;
	}
	struct kg_tol t = {.atol = atol, .rtol = 1e-4, .factor_row = row, .factor_cap = 2e-4};
	struct kg_cmp want;
	kg_compare(ch, rh, KG_F32, n, &t, &want);
	struct kg_dev_check c = {.n = n, .row = (uint64_t)row, .atol = t.atol, .rtol = t.rtol, .cap = t.factor_cap,
				 .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_COMPARE, .poison = 0x7fc0deadu};
	struct kg_dev_cmp got;
	if (kg_keeper_check(k, cand, ref, &c, 1, &got, &e)) {
		fail("judge: CHECK failed: %s%s%lld", e.msg, "", 0);
		return;
	}
	int same = got.n == want.n && got.n_bad == want.n_bad && got.n_nan == want.n_nan && got.n_inf == want.n_inf &&
		   got.first_bad == want.first_bad && got.first_nan == want.first_nan && got.max_abs_idx == want.max_abs_idx &&
		   got.max_rel_idx == want.max_rel_idx && got.tol_used_idx == want.tol_used_idx &&
		   (got.max_abs_err == want.max_abs_err || fabs(got.max_abs_err - want.max_abs_err) <= 1e-12 * want.max_abs_err) &&
		   fabs(got.ref_sq - want.ref_sq) <= 1e-9 * want.ref_sq && got.first_unwritten < 0;
	printf("  judge n=%zu row=%lld: %lld bad, first %lld, max abs %.3g at %lld (host: %lld, %lld, %.3g at %lld)\n", n,
	       (long long)row, (long long)got.n_bad, (long long)got.first_bad, got.max_abs_err, (long long)got.max_abs_idx,
	       (long long)want.n_bad, (long long)want.first_bad, want.max_abs_err, (long long)want.max_abs_idx);
	if (!same) {
		fprintf(stderr,
			"  device: n %lld nan %lld inf %lld first_nan %lld max_rel %lld tol_used %lld ref_sq %.17g unwritten %lld\n"
			"  host:   n %lld nan %lld inf %lld first_nan %lld max_rel %lld tol_used %lld ref_sq %.17g\n",
			(long long)got.n, (long long)got.n_nan, (long long)got.n_inf, (long long)got.first_nan,
			(long long)got.max_rel_idx, (long long)got.tol_used_idx, got.ref_sq, (long long)got.first_unwritten,
			(long long)want.n, (long long)want.n_nan, (long long)want.n_inf, (long long)want.first_nan,
			(long long)want.max_rel_idx, (long long)want.tol_used_idx, want.ref_sq);
		fail("judge: the device's CHECK differs from kg_compare %s%s(n %lld)", "", "", (long long)n);
	}
	/* the same rules on the host (device/judge.h, as CI's fake keeper runs them): the same hash */
	struct kg_dev_cmp mine;
	kg_judge_host(&c, ch, rh, &mine);
	if (mine.hash != got.hash || mine.n_bad != got.n_bad || mine.first_unwritten != got.first_unwritten)
		fail("judge: the device's hash or counts differ from device/judge.h's on the host %s%s(n %lld)", "", "",
		     (long long)n);
	struct kg_dev_check s = {.n = n, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_STATS, .poison = 0x7fc0deadu};
	if (kg_keeper_check(k, ref, -1, &s, 1, &got, &e)) {
		fail("judge: STATS failed: %s%s%lld", e.msg, "", 0);
		return;
	}
	double rms = kg_rms(rh, KG_F32, n), drms = got.n_finite ? sqrt(got.sum_sq / (double)got.n_finite) : 0;
	if (fabs(rms - drms) > 1e-12 * rms || got.first_poison >= 0)
		fail("judge: STATS's RMS %s%s differs (%lld)", "", "", 0);
	/* the distance from constants (the degenerate check's): the same counts as on the host */
	s.near = 1;
	s.atol = 1.0;
	s.rtol = 0.5;
	s.c[0] = 0.0;
	s.c[1] = got.n_finite ? got.sum / (double)got.n_finite : 0.0;
	if (kg_keeper_check(k, ref, -1, &s, 1, &got, &e)) {
		fail("judge: STATS near failed: %s%s%lld", e.msg, "", 0);
		return;
	}
	kg_judge_host(&s, rh, NULL, &mine);
	printf("  stats n=%zu: %lld and %lld far from 0 and the mean (host: %lld and %lld)\n", n, (long long)got.far[0],
	       (long long)got.far[1], (long long)mine.far[0], (long long)mine.far[1]);
	if (got.far[0] != mine.far[0] || got.far[1] != mine.far[1])
		fail("judge: STATS's distances from constants differ %s%s(%lld)", "", "", (long long)got.far[0]);
}

/* A batched call's sets (wire.h): the reference's slot draws `sets` sets of one input under each
 * set's key (its output a band after it), the candidate's copies them from it set by set (SLOT);
 * END snapshots every set (the candidate's, and the reference's second END, of the input region
 * itself, so that the snapshots hold the draws): STATS of each set equals the host's draw under
 * kg_gen_set_key, the whole image is as staged, and COMPARE finds set k of one side equal to set
 * k of the other and unequal to the next set. */
static void batch(struct kg_keeper *k, const int slot[2], uint32_t sets, size_t n, uint64_t stride)
{
	size_t bytes = n * 4 + 64;
	kg_error e = {0};
	kg_key key = {{0x0badf00d, 3, 5, 7, 11, 13, 17, 19}};
	int64_t shape[2] = {(int64_t)(n / 64), 64};
	struct kg_keeper_stage st = {
		.n = 2,
		.sets = sets,
		.stride = stride,
		.range = {{.off = 0, .bytes = n * 4, .kind = KG_DEV_R_GEN},
			  {.off = n * 4, .bytes = 64, .pattern = 0x7fc00001u, .kind = KG_DEV_R_FILL, .elem = 4}}};
	kg_inputs_params(&st.range[0].gen, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 0, &key, 0);
	memcpy(st.key, key.w, sizeof(st.key));
	struct kg_keeper_stage from = {.n = 1, .sets = sets, .stride = stride, .src_slot = slot[0],
				       .range = {{.off = 0, .bytes = n * 4, .kind = KG_DEV_R_SLOT}}};
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed[3];
	if (kg_keeper_begin(k, slot[0], bytes, 1, &st, &t0, &e) ||
	    kg_keeper_end(k, slot[0], bytes, n * 4, bytes, 0, 1, &ed[0], &e) ||
	    kg_keeper_begin(k, slot[1], bytes, 1, &from, &t0, &e) ||
	    kg_keeper_end(k, slot[1], bytes, 0, n * 4, 0, 1, &ed[1], &e) ||
	    kg_keeper_end(k, slot[0], bytes, 0, n * 4, 0, 1, &ed[2], &e)) {
		fail("batch: the calls failed: %s%s (%lld sets)", e.msg, "", (long long)sets);
		return;
	}
	for (int i = 0; i < 3; i++) /* the third END follows no START: no span on the device's clock */
		if (ed[i].in_state != KG_DEV_IN_SAME || (i < 2 && !ed[i].dev_ns))
			fail("batch: END found the image %s%s (state %lld), not as staged, or no device clock", "changed", "",
			     (long long)ed[i].in_state);
	float *mine = malloc(n * 4);
	double prev = 0;
	int checked = 0;
	for (uint32_t set = 0; mine && set < sets; set += set + 1 < 4 ? 1 : sets / 5 + 1, checked++) {
		kg_key sk = {{0}};
		kg_gen_set_key(key.w, set, sk.w);
		kg_inputs_fill_tensor(mine, &st.range[0].gen, &sk);
		double sum = 0;
		for (size_t i = 0; i < n; i++)
			sum += mine[i];
		struct kg_dev_check chk[3] = {
			{.off = set * stride, .n = n, .poison = 0x7fc00001u, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_STATS},
			{.off = set * stride, .ref_off = set * stride, .n = n, .poison = 0x7fc00001u, .atol = 0, .rtol = 0,
			 .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_COMPARE},
			{.off = set * stride, .ref_off = ((set + 1) % sets) * stride, .n = n, .poison = 0x7fc00001u,
			 .atol = 0, .rtol = 0, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_COMPARE}};
		struct kg_dev_cmp out[3], stat;
		if (kg_keeper_check(k, slot[1], -1, chk, 1, &stat, &e) || kg_keeper_check(k, slot[1], slot[0], chk + 1, 2, out, &e)) {
			fail("batch: CHECK failed: %s%s (set %lld)", e.msg, "", (long long)set);
			break;
		}
		if (stat.n_finite != (int64_t)n || fabs(stat.sum - sum) > 1e-9 * (fabs(sum) + (double)n))
			fail("batch: set %s%s%lld's draw is not the host's under its key", "", "", (long long)set);
		if (set && stat.sum == prev)
			fail("batch: set %s%s%lld holds the draw of the set before it", "", "", (long long)set);
		prev = stat.sum;
		if (out[0].n_bad || out[0].first_unwritten >= 0)
			fail("batch: the copy of set %s%s%lld differs from its source", "", "", (long long)set);
		if (!out[1].n_bad)
			fail("batch: set %s%s%lld equals another set", "", "", (long long)set);
	}
	free(mine);
	/* an ordinary call on the same slot after a batch: one set again */
	struct kg_keeper_stage one = st;
	one.sets = 0;
	if (kg_keeper_begin(k, slot[0], bytes, 1, &one, &t0, &e) || kg_keeper_end(k, slot[0], bytes, n * 4, bytes, 0, 0, &ed[0], &e))
		fail("batch: an ordinary call after it failed: %s%s (%lld)", e.msg, "", 0);
	printf("batch of %u sets of %zu floats: %d sets checked\n", sets, n, checked);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* until the page's word at off reaches want (cyclically), at most 2 s; the ns it took, or 0 */
static uint64_t wait_word(volatile uint32_t *g, uint32_t off, uint32_t want)
{
	uint64_t t0 = now_ns();
	while ((int32_t)(__atomic_load_n(g + off / 4, __ATOMIC_ACQUIRE) - want) < 0)
		if (now_ns() - t0 > 2000000000ull)
			return 0;
	uint64_t t = now_ns() - t0;
	return t ? t : 1;
}

/* kgate-device's gated calls, on a keeper of their own, this program the runner: every mark it
 * stores from the CPU, every release it reads there (the device writes the page) */
static void gate_checks(const char *dev, int require)
{
	struct kg_keeper k;
	kg_error e = {0};
	if (kg_keeper_start(&k, dev, &e)) {
		fail("gate: the keeper did not start: %s%s%lld", e.msg, "", 0);
		return;
	}
	printf("gate: quiet flush %.1f us, %.0f MiB of device memory free\n", (double)k.quiet_flush_ns / 1e3,
	       (double)k.mem_free / 1048576.0);
	if (!(k.caps & KG_DEV_CAP_GATE)) {
		if (require)
			fail("gate: kgate-device has no gated calls on this device (its self-test of the stream memory "
			     "operations failed)%s%s%lld",
			     "", "", 0);
		kg_keeper_stop(&k);
		return;
	}
	const size_t bytes = 64u << 10, stride = 64u << 10;
	int fd = memfd_create("gpu-gate-arena", MFD_CLOEXEC), pfd = memfd_create("gpu-gate-page", MFD_CLOEXEC), slot, dfd;
	size_t dbytes;
	unsigned char *host;
	volatile uint32_t *g;
	if (fd < 0 || pfd < 0 || ftruncate(fd, (off_t)bytes) || ftruncate(pfd, KG_DEV_GATE_BYTES) ||
	    (host = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED ||
	    (g = mmap(NULL, KG_DEV_GATE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0)) == MAP_FAILED ||
	    kg_keeper_attach(&k, fd, bytes, 4, stride, &slot, &dfd, &dbytes, &e) || kg_keeper_gate(&k, slot, pfd, &e)) {
		fail("gate: attaching the arena and its page failed: %s%s%lld", e.msg, "", 0);
		kg_keeper_stop(&k);
		return;
	}
	close(dfd);
	memset(host, 0x11, bytes);
	/* the input [0, 16K), the output [20K, 36K) poisoned on the device */
	struct kg_keeper_stage st = {.n = 1,
				     .range = {{.off = 20480, .bytes = 16384, .pattern = 0x7fc00001u, .kind = KG_DEV_R_FILL, .elem = 4}},
				     .gate = 1,
				     .out_lo = 20480,
				     .out_hi = 36864};
	struct kg_keeper_begun bg;
	struct kg_keeper_ended ed;
	/* a lone call, every mark: the release reaches the CPU only after ARMED */
	if (kg_keeper_begin(&k, slot, bytes, 1, &st, &bg, &e)) {
		fail("gate: START failed: %s%s%lld", e.msg, "", 0);
	} else {
		struct timespec ts = {0, 20000000};
		nanosleep(&ts, NULL);
		if ((int32_t)(g[KG_DEV_GATE_RELEASED / 4] - bg.tok) >= 0)
			fail("gate: the call was released %s%s(token %lld) before the runner armed it", "", "", (long long)bg.tok);
		__atomic_store_n(g + KG_DEV_GATE_ARMED / 4, bg.tok, __ATOMIC_RELEASE);
		uint64_t rel = wait_word(g, KG_DEV_GATE_RELEASED, bg.tok);
		__atomic_store_n(g + KG_DEV_GATE_DONE / 4, bg.tok, __ATOMIC_RELEASE);
		if (!rel)
			fail("gate: the release never reached the CPU%s%s (token %lld)", "", "", (long long)bg.tok);
		if (kg_keeper_end(&k, slot, bytes, 20480, 36864, 16384, 0, &ed, &e))
			fail("gate: END failed: %s%s%lld", e.msg, "", 0);
		else if (ed.gate != KG_DEV_GATE_OK || !ed.dev_ns || !ed.flush_ns)
			fail("gate: a call with every mark: gate %s%s%lld (or no span, no flush time)", "", "", (long long)ed.gate);
		else
			printf("gate: ARMED to the release on the CPU %.1f us; span %.1f us (its flush %.1f us) with the CPU's "
			       "round trip in it\n",
			       (double)rel / 1e3, (double)ed.dev_ns / 1e3, (double)ed.flush_ns / 1e3);
	}
	/* no ARMED, then no DONE: named, and forced through */
	for (int miss = 0; miss < 2; miss++) {
		if (kg_keeper_begin(&k, slot, bytes, 0, &st, &bg, &e)) {
			fail("gate: START failed: %s%s%lld", e.msg, "", 0);
			continue;
		}
		if (miss)
			__atomic_store_n(g + KG_DEV_GATE_ARMED / 4, bg.tok, __ATOMIC_RELEASE);
		if (kg_keeper_end(&k, slot, bytes, 20480, 36864, 16384, 0, &ed, &e))
			fail("gate: END of a call whose mark never came failed: %s%s%lld", e.msg, "", 0);
		else if (ed.gate != (miss ? KG_DEV_GATE_NO_DONE : KG_DEV_GATE_NO_ARM) || ed.gate_set != 0)
			fail("gate: a call without its %s mark named%s %lld", miss ? "DONE" : "ARMED", "", (long long)ed.gate);
	}
	/* a batch of four: each set released only after the one before it was marked done */
	struct kg_keeper_stage bt = st;
	bt.sets = 4;
	bt.stride = stride;
	if (kg_keeper_begin(&k, slot, 36864 + 4096, 1, &bt, &bg, &e)) {
		fail("gate: a batch's START failed: %s%s%lld", e.msg, "", 0);
	} else {
		__atomic_store_n(g + KG_DEV_GATE_ARMED / 4, bg.tok, __ATOMIC_RELEASE);
		for (uint32_t set = 0; set < 4; set++) {
			if (!wait_word(g, KG_DEV_GATE_RELEASED, bg.tok + set)) {
				fail("gate: set %s%s%lld of a batch never released", "", "", (long long)set);
				break;
			}
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
			if (g[KG_DEV_GATE_RELEASED / 4] != bg.tok + set)
				fail("gate: set %s%s%lld's successor released before it was done", "", "", (long long)set);
			__atomic_store_n(g + KG_DEV_GATE_DONE / 4, bg.tok + set, __ATOMIC_RELEASE);
		}
		if (kg_keeper_end(&k, slot, 36864 + 4096, 20480, 36864, 0, 1, &ed, &e) || ed.gate != KG_DEV_GATE_OK)
			fail("gate: a batch's END: %s%s (gate %lld)", e.msg, "", (long long)ed.gate);
		else
			printf("gate: a batch of 4, each set released after the last was done: span %.1f us, flush median %.1f "
			       "us, most %.1f us\n",
			       (double)ed.dev_ns / 1e3, (double)ed.flush_ns / 1e3, (double)ed.flush_max_ns / 1e3);
	}
	/* the mid-call probe over the input: as staged, at a moment 50 us after the release */
	struct kg_keeper_stage pr = st;
	pr.probe_ns = 50000;
	pr.probe_bytes[0] = 16384;
	if (kg_keeper_begin(&k, slot, bytes, 0, &pr, &bg, &e)) {
		fail("gate: a probed START failed: %s%s%lld", e.msg, "", 0);
	} else {
		__atomic_store_n(g + KG_DEV_GATE_ARMED / 4, bg.tok, __ATOMIC_RELEASE);
		wait_word(g, KG_DEV_GATE_RELEASED, bg.tok);
		__atomic_store_n(g + KG_DEV_GATE_DONE / 4, bg.tok, __ATOMIC_RELEASE);
		if (kg_keeper_end(&k, slot, bytes, 20480, 36864, 16384, 0, &ed, &e) || ed.probe_state != KG_DEV_IN_SAME)
			fail("gate: the probe of an untouched input: %s%s (state %lld)", e.msg, "", (long long)ed.probe_state);
	}
	uint64_t mf = 0;
	if (kg_keeper_meminfo(&k, &mf, &e) || !mf)
		fail("gate: MEMINFO: %s%s%lld", e.msg, "", 0);
	munmap(host, bytes);
	munmap((void *)g, KG_DEV_GATE_BYTES);
	close(fd);
	close(pfd);
	kg_keeper_stop(&k);
}


/* ---- the quiet-device probe against another context's work ---- */

/* kgate-device's kernels (device/fatbin.S, empty without nvcc): their flush kernel is a hog */
extern const unsigned char kg_device_fatbin[];
extern const uint64_t kg_device_fatbin_size;

struct hog_api {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_query)(CUstream);
	CUresult (*ctx_synchronize)(void);
	CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*module_load_data)(void **, const void *);
	CUresult (*module_get_function)(void **, void *, const char *);
	CUresult (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
				  void **, void **);
};

#define HOG_BYTES ((size_t)1 << 30)
#define HOG_BATCH 300 /* passes over the buffer queued at a time: ~0.1 s on an H100, alone */

struct hog {
	struct hog_api cu;
	CUstream st;
	CUdeviceptr buf;
	void *fn; /* kg_flush: a kernel hog; NULL: a copy-engine hog (half the buffer to the other) */
	unsigned v;
};

/* HOG_BATCH more passes of the hog on its stream; 0 when queued */
static int hog_more(struct hog *h)
{
	for (int i = 0; i < HOG_BATCH; i++) {
		CUdeviceptr p = h->buf;
		unsigned long long n = HOG_BYTES / 16;
		unsigned val = ++h->v;
		void *params[] = {&p, &n, &val};
		if (h->fn ? h->cu.launch_kernel(h->fn, 1056, 1, 1, 256, 1, 1, 0, h->st, params, NULL) /* 8 an SM of an H100's */
			  : h->cu.memcpy_dtod_async(h->buf + (i & 1 ? 0 : HOG_BYTES / 2), h->buf + (i & 1 ? HOG_BYTES / 2 : 0),
						    HOG_BYTES / 2, h->st))
			return -1;
	}
	return 0;
}

/* One ungated call of the keeper's with its flush (a page, as the calibration's): the flush's time
 * on the keeper's events and the call's span on the device's clock, as END gives them; 0 when the
 * call failed. */
static uint64_t timed_flush(struct kg_keeper *k, int slot, uint64_t *span)
{
	struct kg_keeper_begun bg;
	struct kg_keeper_ended ed;
	kg_error e = {0};
	*span = 0;
	if (kg_keeper_begin(k, slot, 0, 1, NULL, &bg, &e) || kg_keeper_end(k, slot, 0, 0, 0, 0, 0, &ed, &e)) {
		fail("hog: a flushed call failed: %s%s%lld", e.msg, "", 0);
		return 0;
	}
	*span = ed.dev_ns;
	return ed.flush_ns;
}

/* Five flushed calls of the keeper's beside the hog (a call the hog's end overtook tells nothing:
 * taken again, beside more of it), then five once it is done: judge/clock.c's rule (kg_timing_busy)
 * must read the first busy and the others quiet. */
static void hog_one(struct hog *h, struct kg_keeper *k, int slot, const char *what)
{
	uint64_t quiet = k->quiet_flush_ns, busy[5] = {0}, after[5] = {0}, sb[5] = {0}, sa[5] = {0};
	int n_busy = 0, n_quiet = 0, ran_out = 0, n = 0;
	if (hog_more(h))
		fail("hog: queueing %s%s failed%lld", what, "", 0);
	for (int tries = 0; n < 5 && tries < 10; tries++) {
		if (h->cu.stream_query(h->st) != CUDA_ERROR_NOT_READY && hog_more(h))
			break;
		uint64_t sp, f = timed_flush(k, slot, &sp);
		if (h->cu.stream_query(h->st) != CUDA_ERROR_NOT_READY) {
			ran_out++;
			continue;
		}
		sb[n] = sp;
		busy[n++] = f;
		n_busy += kg_timing_busy(f, quiet);
	}
	uint64_t t0 = now_ns();
	if (h->cu.ctx_synchronize())
		fail("hog: waiting for %s%s failed%lld", what, "", 0);
	uint64_t waited = now_ns() - t0;
	for (int i = 0; i < 5; i++) {
		after[i] = timed_flush(k, slot, &sa[i]);
		n_quiet += after[i] && !kg_timing_busy(after[i], quiet);
	}
	printf("hog: %s in another context (this program's): the keeper's flush, quiet %.1f us, busy above %.1f us\n"
	       "     beside it: flush %.1f %.1f %.1f %.1f %.1f us (%d busy), span %.1f %.1f %.1f %.1f %.1f us\n"
	       "     after it:  flush %.1f %.1f %.1f %.1f %.1f us (%d quiet), span %.1f %.1f %.1f %.1f %.1f us\n"
	       "     (%d call(s) outlasted the hog and were taken again; it ran %.1f ms past the last)\n",
	       what, (double)quiet / 1e3, (KG_QUIET_RATIO * (double)quiet + KG_QUIET_SLACK_NS) / 1e3, (double)busy[0] / 1e3,
	       (double)busy[1] / 1e3, (double)busy[2] / 1e3, (double)busy[3] / 1e3, (double)busy[4] / 1e3, n_busy,
	       (double)sb[0] / 1e3, (double)sb[1] / 1e3, (double)sb[2] / 1e3, (double)sb[3] / 1e3, (double)sb[4] / 1e3,
	       (double)after[0] / 1e3, (double)after[1] / 1e3, (double)after[2] / 1e3, (double)after[3] / 1e3,
	       (double)after[4] / 1e3, n_quiet, (double)sa[0] / 1e3, (double)sa[1] / 1e3, (double)sa[2] / 1e3,
	       (double)sa[3] / 1e3, (double)sa[4] / 1e3, ran_out, (double)waited / 1e6);
	if (n < 5)
		fail("hog: %s: fewer than five flushes beside it were timed%s (%lld outlasted it)", what, "", (long long)ran_out);
	/* the reference's measurement is retaken KG_QUIET_RETAKES times: most must read busy */
	if (n_busy < 4)
		fail("hog: %s: only %s%lld of 5 flushes beside another context's work read busy", what, "", (long long)n_busy);
	if (n_quiet < 4)
		fail("hog: %s: only %s%lld of 5 flushes on the quiet device after it read quiet", what, "", (long long)n_quiet);
}

/* judge/clock.c's quiet-device rule (kg_timing_busy), by which kgate judges the reference's
 * measurements: the flush inside them, a kernel of kgate-device's, against its time on the quiet
 * device. Beside work of another context (this program's own, a process apart from the keeper's
 * as a candidate's runner is), a kernel's and then a copy engine's, the flush must read busy;
 * once that work is done, quiet again. This is what a candidate's hog would meet; the run filter
 * keeps a candidate from making a context of its own (examples/cuda/hostile/hog_kernel.cu), so the
 * rule is shown here, from a trusted one. Each case prints the flushes and the calls' spans. */
static void hog_checks(const char *dev)
{
	static struct hog h;
	static const struct kg_cu_sym syms[] = {
		{"cuInit", offsetof(struct hog_api, init)},
		{"cuDeviceGet", offsetof(struct hog_api, device_get)},
		{"cuDevicePrimaryCtxRetain", offsetof(struct hog_api, primary_retain)},
		{"cuCtxSetCurrent", offsetof(struct hog_api, ctx_set_current)},
		{"cuMemAlloc_v2", offsetof(struct hog_api, mem_alloc)},
		{"cuStreamCreate", offsetof(struct hog_api, stream_create)},
		{"cuStreamQuery", offsetof(struct hog_api, stream_query)},
		{"cuCtxSynchronize", offsetof(struct hog_api, ctx_synchronize)},
		{"cuMemcpyDtoDAsync_v2", offsetof(struct hog_api, memcpy_dtod_async)},
		{"cuModuleLoadData", offsetof(struct hog_api, module_load_data)},
		{"cuModuleGetFunction", offsetof(struct hog_api, module_get_function)},
		{"cuLaunchKernel", offsetof(struct hog_api, launch_kernel)},
	};
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	const char *missing = lib ? kg_cu_resolve(lib, syms, sizeof(syms) / sizeof(syms[0]), 9, &h.cu) : "libcuda.so.1";
	CUdevice d = 0;
	CUcontext ctx = NULL;
	void *mod = NULL;
	if (missing || h.cu.init(0) || h.cu.device_get(&d, 0) || h.cu.primary_retain(&ctx, d) || h.cu.ctx_set_current(ctx) ||
	    h.cu.mem_alloc(&h.buf, HOG_BYTES) || h.cu.stream_create(&h.st, CU_STREAM_NON_BLOCKING)) {
		fail("hog: this program's own context and %s%s%lld GiB for the hog (the driver lacks it, or refused)",
		     missing ? missing : "", "", 1);
		return;
	}
	struct kg_keeper k;
	kg_error e = {0};
	int fd = memfd_create("gpu-hog-arena", MFD_CLOEXEC), slot, dfd;
	size_t dbytes;
	if (kg_keeper_start(&k, dev, &e) || fd < 0 || ftruncate(fd, 65536) ||
	    kg_keeper_attach(&k, fd, 65536, 0, 0, &slot, &dfd, &dbytes, &e)) {
		fail("hog: the keeper and its arena: %s%s%lld", e.msg, "", 0);
		kg_keeper_stop(&k);
		if (fd >= 0)
			close(fd);
		return;
	}
	close(dfd);
	if (!k.quiet_flush_ns)
		fail("hog: the keeper measured no quiet flush at its start%s%s%lld", "", "", 0);
	if (kg_device_fatbin_size && h.cu.module_load_data && h.cu.module_get_function && h.cu.launch_kernel &&
	    !h.cu.module_load_data(&mod, kg_device_fatbin) && !h.cu.module_get_function(&h.fn, mod, "kg_flush"))
		hog_one(&h, &k, slot, "a kernel hog (kgate-device's flush kernel over 1 GiB, 1056 blocks)");
	else
		fail("hog: no kernel for the kernel hog (kgate-device's fatbin)%s%s%lld", "", "", 0);
	h.fn = NULL;
	hog_one(&h, &k, slot, "a copy-engine hog (512 MiB device-to-device copies)");
	kg_keeper_stop(&k);
	close(fd);
}

int main(int argc, char **argv)
{
	int a = 1, require = 0, gate_only = 0, hog_only = 0;
	for (; a < argc && argv[a][0] == '-'; a++) {
		require |= !strcmp(argv[a], "--require");
		gate_only |= !strcmp(argv[a], "--gate");
		hog_only |= !strcmp(argv[a], "--hog");
	}
	const char *dev = a < argc ? argv[a] : "build/kgate-device";
	if (hog_only) {
		struct kg_keeper probe;
		kg_error pe = {0};
		if (kg_keeper_start(&probe, dev, &pe)) {
			printf("SKIP: no device keeper here: %s\n", pe.msg);
			kg_keeper_stop(&probe);
			return 77;
		}
		kg_keeper_stop(&probe);
		hog_checks(dev);
		printf("the quiet-device probe: %d failures\n", failures);
		return failures ? 1 : 0;
	}
	if (gate_only) {
		struct kg_keeper probe;
		kg_error pe = {0};
		if (kg_keeper_start(&probe, dev, &pe)) {
			printf("SKIP: no device keeper here: %s\n", pe.msg);
			kg_keeper_stop(&probe);
			return 77;
		}
		kg_keeper_stop(&probe);
		gate_checks(dev, require);
		printf("gated calls: %d failures\n", failures);
		return failures ? 1 : 0;
	}
	struct kg_keeper k;
	kg_error e = {0};
	if (kg_keeper_start(&k, dev, &e)) {
		printf("SKIP: no device keeper here: %s\n", e.msg);
		kg_keeper_stop(&k);
		return 77;
	}
	if ((k.caps & (KG_DEV_CAP_GEN | KG_DEV_CAP_CMP)) != (KG_DEV_CAP_GEN | KG_DEV_CAP_CMP)) {
		printf("%s: kgate-device has no kernels (built without nvcc)\n", require ? "FAIL" : "SKIP");
		kg_keeper_stop(&k);
		return require ? 1 : 77;
	}
	int fd = memfd_create("gpu-kernels", MFD_CLOEXEC);
	/* the host's own draw of each, beside the device's (static: freed with the program) */
	static unsigned char *mine;
	unsigned char *host = NULL;
	mine = malloc(ARENA);
	if (fd < 0 || ftruncate(fd, (off_t)ARENA) ||
	    (host = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED || !mine) {
		perror("gpu-kernels: arena");
		return 1;
	}
	int slot, dfd;
	size_t dbytes;
	if (kg_keeper_attach(&k, fd, ARENA, 0, 0, &slot, &dfd, &dbytes, &e)) {
		fprintf(stderr, "FAIL attach: %s\n", e.msg);
		return 1;
	}
	close(dfd); /* no runner here: the mirror is the keeper's alone */
	kg_key key = {{0x01234567, 0x89abcdef, 7, 8, 9, 10, 11, 12}};
	const kg_dtype dts[] = {KG_F32, KG_F16, KG_BF16, KG_I32, KG_I64, KG_U8, KG_BOOL};
	const int64_t small[3] = {3, 37, 37}, rows[2] = {1000, 1031};
	int draws = 0;
	for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
		for (int c = 0; c < KG_CLASS_COUNT_; c++) {
			draws += !one(&k, slot, host, mine, dts[d], (enum kg_input_class)c, small, 3, &key);
			draws += !one(&k, slot, host, mine, dts[d], (enum kg_input_class)c, rows, 2, &key);
		}
	/* softmax's nominal rows, a quarter of them: 256 MiB of fp32 */
	const int64_t big[2] = {1024, 65536};
	const enum kg_input_class bigc[] = {KG_CLASS_NORMAL, KG_CLASS_SPIKED, KG_CLASS_MIXED, KG_CLASS_TINY};
	for (size_t i = 0; i < sizeof(bigc) / sizeof(bigc[0]); i++)
		draws += !one(&k, slot, host, mine, KG_F32, bigc[i], big, 2, &key);
	/* END's look at the inputs: drawn on the device, as staged, so the host arena's stays as it was */
	const size_t in_bytes = 4u << 20, out_bytes = 1u << 20;
	struct kg_keeper_stage st = {
		.n = 2,
		.range = {{.off = 0, .bytes = in_bytes, .kind = KG_DEV_R_GEN},
			  {.off = in_bytes, .bytes = out_bytes, .pattern = 0x7fc00001u, .kind = KG_DEV_R_FILL, .elem = 4}}};
	int64_t ishape[1] = {(int64_t)(in_bytes / 4)};
	kg_inputs_params(&st.range[0].gen, KG_F32, in_bytes / 4, ishape, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 0, &key, 0);
	memcpy(st.key, key.w, sizeof(st.key));
	memset(host, 0xab, in_bytes + out_bytes);
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed;
	if (kg_keeper_begin(&k, slot, in_bytes + out_bytes, 1, &st, &t0, &e) ||
	    kg_keeper_end(&k, slot, in_bytes + out_bytes, in_bytes, in_bytes + out_bytes, in_bytes, 0, &ed, &e))
		fail("%s%s the compare call failed: %lld", e.msg, "", 0);
	else if (ed.in_state != KG_DEV_IN_SAME)
		fail("END found the inputs %s%s (state %lld), not as staged", "changed", "", (long long)ed.in_state);
	else if (host[0] != 0xab || host[in_bytes - 1] != 0xab)
		fail("END sent the inputs back %s%s (%lld)", "though", " they were as staged", 0);
	else {
		uint32_t w;
		memcpy(&w, host + in_bytes, 4);
		if (w != 0x7fc00001u)
			fail("END did not send the outputs %s%s (%lld)", "", "", 0);
	}
	/* outputs judged on the device: a second arena for the reference's side */
	int fd2 = memfd_create("gpu-kernels-ref", MFD_CLOEXEC), slot2, dfd2;
	unsigned char *host2;
	if (fd2 < 0 || ftruncate(fd2, (off_t)ARENA) ||
	    (host2 = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0)) == MAP_FAILED ||
	    kg_keeper_attach(&k, fd2, ARENA, 0, 0, &slot2, &dfd2, &dbytes, &e)) {
		fprintf(stderr, "FAIL attach (second arena): %s\n", e.msg);
		return 1;
	}
	close(dfd2);
	judge(&k, slot2, host2, slot, host, 1000, 0, 1e-5);
	judge(&k, slot2, host2, slot, host, 64u << 20, 0, 1e-5);
	judge(&k, slot2, host2, slot, host, 64u << 20, 65536, 1e-5);
	judge(&k, slot2, host2, slot, host, 4u << 20, 8, 10.0);
	judge(&k, slot2, host2, slot, host, (64u << 20) + 3, 0, 10.0);
	/* two arenas of the four a keeper holds: the batch's sides */
	const uint64_t wide = ((1u << 22) + 64 + 4095) / 4096 * 4096, narrow = (4096 * 4 + 64 + 4095) / 4096 * 4096;
	int bslot[2], bfd[2], bdfd;
	unsigned char *bhost;
	for (int i = 0; i < 2; i++)
		if ((bfd[i] = memfd_create("gpu-kernels-batch", MFD_CLOEXEC)) < 0 || ftruncate(bfd[i], (off_t)wide) ||
		    (bhost = mmap(NULL, wide, PROT_READ | PROT_WRITE, MAP_SHARED, bfd[i], 0)) == MAP_FAILED ||
		    kg_keeper_attach(&k, bfd[i], wide, 3, wide, &bslot[i], &bdfd, &dbytes, &e) || dbytes < 3 * wide) {
			fprintf(stderr, "FAIL attach (batch arena): %s\n", e.msg);
			return 1;
		} else {
			memset(bhost, 0x5a, wide);
			close(bdfd);
		}
	batch(&k, bslot, 3, 1u << 20, wide);     /* a copy a set */
	batch(&k, bslot, 200, 4096, narrow);     /* the keeper's copy kernel */
	kg_keeper_stop(&k);
	gate_checks(dev, require);
	printf("%d draws compared, %d failures\n", draws, failures);
	return failures ? 1 : 0;
}

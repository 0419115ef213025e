/* Timing statistics and the trusted clock: the per-call bound from the parent's own measures, the
 * reported time that never undercuts it, and the tamper judgement (forged claims rejected, honest
 * ones under CPU contention accepted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "verifier/judge/clock.h"

static void test_stats(void **state)
{
	(void)state;
	double ms[10] = {5, 1, 2, 3, 4, 6, 7, 8, 9, 10};
	struct kg_timing t;
	kg_timing_stats(ms, 10, &t);
	assert_int_equal(t.n, 10);
	assert_float_equal(t.median_ms, 5.5, 1e-12);
	assert_float_equal(t.min_ms, 1, 0);
	assert_float_equal(t.max_ms, 10, 0);
	assert_float_equal(t.p10_ms, 1, 0);
	assert_float_equal(t.p90_ms, 10, 0);
	assert_float_equal(t.spread, 9 / 5.5, 1e-12);
	double one = 2;
	kg_timing_stats(&one, 1, &t);
	assert_float_equal(t.median_ms, 2, 0);
	assert_float_equal(t.spread, 0, 0);
	kg_timing_stats(NULL, 0, &t);
	assert_int_equal(t.n, 0);
}

static const struct kg_clock_cal cpu_cal = {.run_ns = 40000, .cpu_ns = 20000, .cpu_clock = 1, .par = 1};

/* A CPU call: claim, parent round trip, and the CPU time the kernel charged the runner. */
static struct kg_timed_call cpu_call(uint64_t claim, uint64_t parent, uint64_t cpu)
{
	return (struct kg_timed_call){.child_ns = claim, .parent_ns = parent, .span_ns = parent + 30000, .cpu_ns = cpu,
				      .cpu_known = 1};
}

/* Batched timed calls: four images of the sets under two thirds of the device, at most
 * KG_DEV_MAX_SETS; a measurement fills its target at one call's time, within that room. */
static void test_batch_sizes(void **state)
{
	(void)state;
	const uint64_t gib = 1ull << 30, h200 = 143ull * 1000 * 1000 * 1000;
	assert_int_equal(kg_timing_batch_room(h200, 2 * gib + 4096), 11); /* softmax 4096x65536: 2 GiB a set */
	assert_int_equal(kg_timing_batch_room(h200, 64 << 10), 1024);   /* a small block: capped */
	assert_int_equal(kg_timing_batch_room(h200, 12 * gib), 0);      /* no two sets fit */
	assert_int_equal(kg_timing_batch_room(0, 4096), 0);             /* the device's size unknown */
	assert_int_equal(kg_timing_batch_sets(1.27, 6, 25.0), 6);      /* room-bound */
	assert_int_equal(kg_timing_batch_sets(0.0625, 1024, 25.0), 400);
	assert_int_equal(kg_timing_batch_sets(0.03, 1024, 25.0), 834); /* rounded up */
	assert_int_equal(kg_timing_batch_sets(30.0, 1024, 25.0), 1);   /* long enough alone */
	assert_int_equal(kg_timing_batch_sets(1.0, 0, 25.0), 1);       /* no room */
	assert_int_equal(kg_timing_batch_sets(0.0, 16, 25.0), 16);     /* nothing measured: all of it */
}

static void test_bound_cpu(void **state)
{
	(void)state;
	struct kg_timed_call c = cpu_call(600000, 700000, 640000);
	/* CPU time less a call that does nothing */
	assert_int_equal(kg_timing_bound(&c, &cpu_cal), 620000);
	/* an honest claim stands; a short one is raised to the bound */
	assert_int_equal(kg_timing_reported(&c, &cpu_cal), 620000);
	c.child_ns = 630000;
	assert_int_equal(kg_timing_reported(&c, &cpu_cal), 630000);
	c.child_ns = 1000;
	assert_int_equal(kg_timing_reported(&c, &cpu_cal), 620000);
	/* unknown CPU time: no bound from it */
	c.cpu_known = 0;
	assert_int_equal(kg_timing_bound(&c, &cpu_cal), 0);
	/* with threads the CPU time spreads over every CPU */
	struct kg_clock_cal thr = cpu_cal;
	thr.par = 4;
	c = cpu_call(1000, 700000, 4020000);
	assert_int_equal(kg_timing_bound(&c, &thr), 1000000);
}

static void test_bound_device(void **state)
{
	(void)state;
	/* the keeper's span of a call that does nothing is 60 us; the outputs' snapshot takes at least
	 * 15 us at the measured ceiling, and no more than 20 us is ever credited */
	const struct kg_clock_cal dev = {.run_ns = 50000, .span_ns = 60000, .snap_cap_ns = 20000};
	struct kg_timed_call c = {.child_ns = 1000000, .parent_ns = 1080000, .span_ns = 1100000, .tail_ns = 10000};
	/* the span holds the claimed tail too: charged, never subtracted */
	assert_int_equal(kg_timing_bound(&c, &dev), 1040000);
	assert_int_equal(kg_timing_reported(&c, &dev), 1040000);
	c.snap_ns = 15000;
	assert_int_equal(kg_timing_bound(&c, &dev), 1025000);
	c.snap_ns = 900000; /* more than the cap is never subtracted */
	assert_int_equal(kg_timing_bound(&c, &dev), 1020000);
	/* the RUN round trip is nothing to the bound: a runner that answers early and leaves its work
	 * running (a 5 us claim, a 60 us round trip) is charged what the keeper's span holds */
	struct kg_timed_call esc = {.child_ns = 5000, .parent_ns = 60000, .span_ns = 400000};
	assert_int_equal(kg_timing_reported(&esc, &dev), 340000);
	c.span_ns = 10000;
	assert_int_equal(kg_timing_bound(&c, &dev), 0);
	/* a gated batch of 8: each further set's handoffs (calibrated, 7 us each) are the keeper's */
	const struct kg_clock_cal gated = {.span_ns = 60000, .snap_cap_ns = UINT64_MAX, .set_ns = 7000};
	struct kg_timed_call b = {.span_ns = 1000000, .snap_ns = 40000, .sets = 8};
	assert_int_equal(kg_timing_bound(&b, &gated), 1000000 - 60000 - 40000 - 7 * 7000);
	b.sets = 1; /* one call: none */
	assert_int_equal(kg_timing_bound(&b, &gated), 1000000 - 60000 - 40000);
}

/* The quiet device: a flush inside the reference's measurement within 1.3 times the quiet one and
 * 10 us is quiet; beyond, busy; nothing is said where either figure is unknown. */
static void test_quiet(void **state)
{
	(void)state;
	assert_false(kg_timing_busy(33000, 33000));
	assert_false(kg_timing_busy(52900, 33000)); /* 1.3 * 33 + 10 = 52.9 us */
	assert_true(kg_timing_busy(53000, 33000));
	assert_true(kg_timing_busy(2000000, 33000)); /* a time slice of another context's */
	assert_false(kg_timing_busy(0, 33000));
	assert_false(kg_timing_busy(2000000, 0));
}

static void test_tamper_cpu(void **state)
{
	(void)state;
	struct kg_timed_call c[5];
	struct kg_tamper t;
	/* honest under heavy contention: round trips seven times the claim, CPU time matches it
	 * (the false rejection of online.c during a parallel build) */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(610000, 4373000, 640000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.impossible, -1);
	assert_int_equal(t.lies, 0);
	assert_false(t.forged);
	/* a claim longer than the parent's round trip cannot be */
	c[1].child_ns = 5000000;
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.impossible, 1);
	assert_true(t.forged);
	/* a skewed clock: 1% claimed of work the CPU time shows, in every call (even short ones) */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(6000, 700000, 620000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.lies, 5);
	assert_int_equal(t.first_lie, 0);
	assert_true(t.forged);
	/* one odd call in five is noise, not forgery */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(600000, 700000, 620000);
	c[3].cpu_ns = 3000000;
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.lies, 1);
	assert_false(t.forged);
	/* three odd calls in five on a busy host (seen: 70 us claimed, 330 us of CPU time) are not
	 * forgery either; four are */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(70000, 400000, i < 3 ? 350000 : 90000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.lies, 3);
	assert_false(t.forged);
	c[3] = c[0];
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_int_equal(t.lies, 4);
	assert_true(t.forged);
	/* five in five on a busy host (CI: 64.5 us claimed, 275 us bound, layernorm_pairwise.c), when
	 * the trusted reference's runner, timed beside it, was charged as much beyond its own clock:
	 * the host's noise, no lie. A forger hiding 0.5 ms (stack_clock.c) still lies through it. */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(64500, 400000, 275000 + 20000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_true(t.forged);
	struct kg_clock_cal busy = cpu_cal;
	busy.host_noise_ns = 220000;
	kg_timing_tamper(c, 5, &busy, &t);
	assert_int_equal(t.lies, 0);
	assert_false(t.forged);
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(6600, 700000, 524000 + 20000);
	busy.host_noise_ns = 150000;
	kg_timing_tamper(c, 5, &busy, &t);
	assert_true(t.forged);
	/* a busy host charging an honest 15-30 us kernel 60-130 us beyond its claim in all five calls
	 * while the reference's runner, timed beside it, looked quiet (layernorm_pairwise.c, 1 of
	 * about 20 verifies under a parallel build): each gap under the 150 us a lie must hide */
	const uint64_t claim[5] = {26600, 15900, 31400, 14500, 15900}, cpu[5] = {181000, 126100, 137100, 104800, 117000};
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(claim[i], 120000, cpu[i]);
	struct kg_clock_cal q = cpu_cal;
	q.cpu_ns = 26800;
	q.host_noise_ns = 500;
	kg_timing_tamper(c, 5, &q, &t);
	assert_true(t.lies >= 4);
	assert_true(t.min_gap_ns < KG_TAMPER_MIN_GAP_NS);
	assert_false(t.forged);
	/* a very short kernel: the slack keeps CPU noise of tens of microseconds quiet */
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(5000, 90000, 80000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_false(t.forged);
	/* with threads: eight threads' worth of CPU time in a call that took 0.7 ms is 1 ms over
	 * eight CPUs, a 6 us claim short of it by less than the millisecond a wall-clock bound needs
	 * before a gap is a lie */
	struct kg_clock_cal thr = cpu_cal;
	thr.par = 8;
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(6000, 700000, 8000000);
	kg_timing_tamper(c, 5, &thr, &t);
	assert_false(t.forged);
	/* one thread doing it all, claiming 1 %: its own CPU time bounds it, not that over the host's
	 * CPUs (the red team's threads_forge_gate.c was reported at CPU/ncpu, 2.1x, accepted) */
	thr.par = 2;
	struct kg_timed_call one = cpu_call(8700, 740000, 738700);
	one.thread_cpu_ns = 730000;
	one.thread_known = 1;
	assert_int_equal(kg_timing_bound(&one, &thr), 730000 - 20000);
	/* threads started and ended within the call, one after another (none left to count): the RUN
	 * round trip bounds it */
	one.thread_known = 0;
	assert_int_equal(kg_timing_bound(&one, &thr), 740000 - 40000);
	/* and a forger hiding milliseconds in every call is named */
	for (int i = 0; i < 5; i++) {
		c[i] = cpu_call(8700, 5000000, 4900000);
		c[i].thread_cpu_ns = 4880000;
		c[i].thread_known = 1;
	}
	kg_timing_tamper(c, 5, &thr, &t);
	assert_true(t.forged);
}

/* A sanitizer build's runner spends several times a production one's CPU time on its own code
 * around a call: measured under `make sanitize` beside CI, matmul_transposed.c claimed 249 us of a
 * 416 us bound in 4 of 5 calls (a false timing.tampered). The slack and the least gap of a lie are
 * four times wider there; a forger's millisecond is still named. */
static void test_tamper_sanitizer(void **state)
{
	(void)state;
	struct kg_timed_call c[5];
	struct kg_tamper t;
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(249000, 500000, 436000);
	kg_timing_tamper(c, 5, &cpu_cal, &t);
	assert_true(t.forged); /* a production build's runner: that much CPU time unexplained is a lie */
	struct kg_clock_cal san = cpu_cal;
	san.noise_scale = 4;
	kg_timing_tamper(c, 5, &san, &t);
	assert_false(t.forged);
	for (int i = 0; i < 5; i++)
		c[i] = cpu_call(1000, 1500000, 1300000);
	kg_timing_tamper(c, 5, &san, &t);
	assert_true(t.forged);
}

static void test_tamper_device(void **state)
{
	(void)state;
	const struct kg_clock_cal dev = {.run_ns = 50000, .span_ns = 50000};
	struct kg_timed_call c[3];
	struct kg_tamper t;
	for (int i = 0; i < 3; i++)
		c[i] = (struct kg_timed_call){.child_ns = 10000000, .parent_ns = 10100000, .span_ns = 10300000};
	kg_timing_tamper(c, 3, &dev, &t);
	assert_false(t.forged);
	/* work hidden after the runner's stop event in every call */
	for (int i = 0; i < 3; i++)
		c[i] = (struct kg_timed_call){.child_ns = 100000, .parent_ns = 50000000, .span_ns = 50200000};
	kg_timing_tamper(c, 3, &dev, &t);
	assert_true(t.forged);
	/* one call without the gap (contention made the others): reported at the bound, not judged */
	c[2] = (struct kg_timed_call){.child_ns = 49000000, .parent_ns = 49100000, .span_ns = 49300000};
	kg_timing_tamper(c, 3, &dev, &t);
	assert_false(t.forged);
	assert_int_equal(kg_timing_reported(&c[0], &dev), 50200000 - 50000); /* the keeper's span */
	/* under a millisecond of gap is never a lie */
	c[0] = (struct kg_timed_call){.child_ns = 10000, .parent_ns = 900000, .span_ns = 900000};
	kg_timing_tamper(c, 1, &dev, &t);
	assert_false(t.forged);
}

/* A reported time is held to the machine's measured ceilings, with a margin and per thread. */
static void test_ceiling(void **state)
{
	(void)state;
	char why[200];
	/* 1 GB in 10 ms is 100 GB/s: 2.5x a 40 GB/s ceiling (the margin is 2) */
	assert_int_equal(kg_timing_beyond_ceiling(1e9, 0, 10, 40, 0, 1, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "memory ceiling"));
	/* an honest 80 % of it, and the same with two threads' worth of headroom */
	assert_int_equal(kg_timing_beyond_ceiling(1e9, 0, 31.25, 40, 0, 1, why, sizeof(why)), 0);
	assert_int_equal(kg_timing_beyond_ceiling(1e9, 0, 10, 40, 0, 2, why, sizeof(why)), 0);
	/* arithmetic: 2 TFLOP in 1 s against a 100 GFLOP/s core */
	assert_int_equal(kg_timing_beyond_ceiling(0, 2e12, 1000, 40, 100, 1, why, sizeof(why)), 1);
	assert_non_null(strstr(why, "compute ceiling"));
	assert_int_equal(kg_timing_beyond_ceiling(0, 2e12, 1000, 40, 100, 16, why, sizeof(why)), 0);
	/* unknown ceilings and empty timings say nothing */
	assert_int_equal(kg_timing_beyond_ceiling(1e12, 1e15, 1, 0, 0, 1, why, sizeof(why)), 0);
	assert_int_equal(kg_timing_beyond_ceiling(1e12, 1e15, 0, 40, 100, 1, why, sizeof(why)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ceiling),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_batch_sizes),
		cmocka_unit_test(test_bound_cpu),
		cmocka_unit_test(test_bound_device),
		cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_tamper_cpu),
		cmocka_unit_test(test_tamper_device),
		cmocka_unit_test(test_tamper_sanitizer),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

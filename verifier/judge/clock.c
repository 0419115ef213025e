/* The trusted clock's arithmetic (clock.h): the statistics of the timed calls, the bound the
 * parent's own measures put on each call, the tamper test that holds the runner's claims against
 * it, the quiet device's test, the measured ceilings' test, and how many sets a batched call
 * holds. Pure functions over what the trusted side measured: none of them touches a runner. */
#include "verifier/judge/clock.h"

#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "device/wire.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

void kg_timing_stats(double *ms, int n, struct kg_timing *t)
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

uint64_t kg_timing_bound(const struct kg_timed_call *c, const struct kg_clock_cal *cal)
{
	if (cal->cpu_clock) {
		if (!c->cpu_known || c->cpu_ns <= cal->cpu_ns)
			return 0;
		uint64_t b = (c->cpu_ns - cal->cpu_ns) / (uint64_t)(cal->par > 1 ? cal->par : 1);
		if (cal->par <= 1)
			return b;
		uint64_t thr = c->thread_known && c->thread_cpu_ns > cal->cpu_ns ? c->thread_cpu_ns - cal->cpu_ns : 0;
		uint64_t rt = c->parent_ns > cal->run_ns ? c->parent_ns - cal->run_ns : 0;
		return b > thr ? (b > rt ? b : rt) : (thr > rt ? thr : rt);
	}
	/* The keeper's span, from the inputs on the device to its snapshot of the outputs, less the
	 * protocol's own span (calibrated) and the least the snapshot itself can take: whatever else
	 * kept the device busy in between is the candidate's. Never the claimed tail. */
	uint64_t snap = c->snap_ns < cal->snap_cap_ns ? c->snap_ns : cal->snap_cap_ns;
	uint64_t idle = cal->span_ns + snap + (c->sets > 1 ? (uint64_t)(c->sets - 1) * cal->set_ns : 0);
	return c->span_ns > idle ? c->span_ns - idle : 0;
}

int kg_timing_busy(uint64_t flush_ns, uint64_t quiet_ns)
{
	if (!flush_ns || !quiet_ns)
		return 0;
	return (double)flush_ns > KG_QUIET_RATIO * (double)quiet_ns + (double)KG_QUIET_SLACK_NS;
}

uint64_t kg_timing_reported(const struct kg_timed_call *c, const struct kg_clock_cal *cal)
{
	uint64_t lb = kg_timing_bound(c, cal);
	return c->child_ns > lb ? c->child_ns : lb;
}

static int is_lie(const struct kg_timed_call *c, const struct kg_clock_cal *cal)
{
	uint64_t lb = kg_timing_bound(c, cal);
	/* with threads part of the bound is a wall clock, which contention lengthens: judged as a
	 * device's (a gap of a millisecond and half the span) */
	if (cal->cpu_clock && cal->par <= 1)
		return (double)c->child_ns + (double)KG_TAMPER_SLACK_NS * (cal->noise_scale ? cal->noise_scale : 1) +
			       (double)cal->host_noise_ns <
		       KG_TAMPER_SHARE * (double)lb;
	uint64_t gap = lb > c->child_ns ? lb - c->child_ns : 0;
	return gap >= KG_TAMPER_DEVICE_GAP_NS && 2 * gap >= c->span_ns;
}

void kg_timing_tamper(const struct kg_timed_call *calls, int n, const struct kg_clock_cal *cal, struct kg_tamper *t)
{
	memset(t, 0, sizeof(*t));
	t->impossible = t->first_lie = -1;
	for (int i = 0; i < n; i++) {
		const struct kg_timed_call *c = &calls[i];
		/* the runner's clock runs inside the parent's round trip: a longer claim is impossible */
		if (c->child_ns > c->parent_ns + 20000 && t->impossible < 0)
			t->impossible = i;
		if (is_lie(c, cal)) {
			if (t->first_lie < 0)
				t->first_lie = i;
			t->lies++;
			uint64_t lb = kg_timing_bound(c, cal), gap = lb > c->child_ns ? lb - c->child_ns : 0;
			if (t->lies == 1 || gap < t->min_gap_ns)
				t->min_gap_ns = gap;
		}
	}
	int judged = 1;
	/* A forger lies in every call; a busy host has made honest short calls look like lies in 3 of
	 * 5 (cpu_hostile, layernorm_pairwise.c at 70 us, ~0.3 ms of CPU time unexplained), so on the
	 * CPU clock three quarters of the calls must lie. The reported time is the trusted bound
	 * either way (kg_timing_reported): this only decides whether to name the forgery. */
	uint64_t floor_gap = (uint64_t)KG_TAMPER_MIN_GAP_NS * (cal->noise_scale ? cal->noise_scale : 1);
	uint64_t min_gap = 2 * cal->host_noise_ns > floor_gap ? 2 * cal->host_noise_ns : floor_gap;
	int lies_forge = cal->cpu_clock && cal->par <= 1 ? 4 * t->lies >= 3 * n && t->min_gap_ns >= min_gap
							  : t->lies == n;
	t->forged = n > 0 && (t->impossible >= 0 || (judged && t->lies && lies_forge));
}

int kg_timing_beyond_ceiling(double bytes, double flops, double ms, double gbps_ceiling, double gflops_ceiling,
			     int par, char *why, size_t whysz)
{
	if (ms <= 0)
		return 0;
	double k = KG_CEILING_MARGIN * (par > 1 ? par : 1), s = ms * 1e-3;
	if (gbps_ceiling > 0 && bytes > 0 && bytes / s / 1e9 > k * gbps_ceiling) {
		snprintf(why, whysz, "%.1f GB/s, %.0f%% of the measured memory ceiling of %.1f GB/s", bytes / s / 1e9,
			 100 * bytes / s / 1e9 / gbps_ceiling, gbps_ceiling);
		return 1;
	}
	if (gflops_ceiling > 0 && flops > 0 && flops / s / 1e9 > k * gflops_ceiling) {
		snprintf(why, whysz, "%.1f GFLOP/s, %.0f%% of the measured compute ceiling of %.1f GFLOP/s",
			 flops / s / 1e9, 100 * flops / s / 1e9 / gflops_ceiling, gflops_ceiling);
		return 1;
	}
	return 0;
}

uint32_t kg_timing_batch_room(uint64_t mem_bytes, uint64_t stride)
{
	/* four images of the sets (each side's device arena and its private copy), together under
	 * two thirds of the device: the rest stays the kernels' and their libraries' */
	if (!mem_bytes || !stride)
		return 0;
	uint64_t n = mem_bytes / 6 / stride;
	if (n > KG_DEV_MAX_SETS)
		n = KG_DEV_MAX_SETS;
	return n >= 2 ? (uint32_t)n : 0;
}

uint32_t kg_timing_batch_sets(double call_ms, uint32_t room, double target_ms)
{
	if (room < 2 || !(target_ms > 0))
		return 1;
	if (!(call_ms > 0))
		return room;
	double k = target_ms / call_ms;
	if (k <= 1)
		return 1;
	return k >= (double)room ? room : (uint32_t)k + (k > (double)(uint32_t)k);
}

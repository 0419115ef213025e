/* The step timer of a verification (steps.h): wall time per step, printed with KGATE_DEBUG_PHASES. */
#include "verifier/steps.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_common.h"

static const char *const step_name[] = {
#define XX(id, what) what,
	KG_STEPS(XX)
#undef XX
};

static uint64_t total_ns[KG_STEP_COUNT_];
static uint64_t count[KG_STEP_COUNT_];

int kg_steps_on(void)
{
	static int on = -1;
	if (on < 0)
		on = getenv("KGATE_DEBUG_PHASES") != NULL;
	return on;
}

uint64_t kg_steps_add(enum kg_step step, uint64_t t0)
{
	uint64_t now = kg_now_ns();
	if ((unsigned)step < KG_STEP_COUNT_ && now >= t0) {
		__atomic_add_fetch(&total_ns[step], now - t0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&count[step], 1, __ATOMIC_RELAXED);
	}
	return now;
}

void kg_steps_print(void)
{
	if (!kg_steps_on())
		return;
	fprintf(stderr, "[kgate] step profile (wall time; look-ahead overlaps the checks):\n");
	for (int i = 0; i < KG_STEP_COUNT_; i++)
		if (count[i])
			fprintf(stderr, "[kgate]   %-72s %5llu x %9.3f ms = %8.3f s\n", step_name[i],
				(unsigned long long)count[i], (double)total_ns[i] / 1e6 / (double)count[i],
				(double)total_ns[i] / 1e9);
	memset(total_ns, 0, sizeof(total_ns));
	memset(count, 0, sizeof(count));
}

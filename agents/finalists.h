/* A winner that is not noise: the finalists of a search (the fastest few by their first
 * measurement) are re-verified and re-timed, interleaved, each time in one session with the
 * reference; the speedups give each a distribution-free interval for its median, and a finalist
 * wins outright only when its interval clears every other's. Pure functions, unit-tested. */
#ifndef KG_FINALISTS_H
#define KG_FINALISTS_H

#define KG_MAX_FINALISTS 8
#define KG_MAX_RETIME 32

struct kg_interval {
	double median, lo, hi;
	double coverage; /* the probability that [lo, hi] holds the true median, from the order statistics */
	int n;
};

/* The interval [x(k), x(n+1-k)] of the sorted samples for the median, with the largest k whose
 * coverage 1 - 2 P(Bin(n, 1/2) < k) is at least level (k = 1, the range, when none is). Sorts x.
 * n = 0 gives an empty interval (n 0, coverage 0). */
void kg_median_interval(double *x, int n, double level, struct kg_interval *ci);

struct kg_finalist {
	char id[65];
	int order; /* position in the history: earlier wins a tie */
	int n;
	double samples[KG_MAX_RETIME]; /* speedups, one per re-timing */
	int disqualified; /* rejected when verified again */
	int dropped; /* re-timings that gave no figure (timing.tampered only, infrastructure) */
	char why[256];
	struct kg_interval ci;
};

struct kg_decision {
	int winner; /* index into the finalists, -1 when none could be re-timed */
	int significant; /* the winner's interval lies above every other's */
	int n_tied;
	int tied[KG_MAX_FINALISTS]; /* the others that cannot be told apart from the winner: the fastest
				     * and those whose interval reaches into the fastest one's */
	int faster_than_reference; /* the winner's interval lies above 1 */
};

/* The interval of each finalist (level: e.g. 0.9) and the decision: the finalist with the highest
 * median; when other intervals overlap its own there is no significant difference and the
 * earliest of the overlapping ones (by order) is the winner, a choice that does not depend on
 * which of equals happened to measure faster. */
void kg_finalists_decide(struct kg_finalist *f, int n, double level, struct kg_decision *d);

#endif

/* The finalists' statistics: an order-statistics interval for each one's median speedup (no
 * assumption about the distribution of timings, which is skewed and heavy-tailed), and the
 * decision that names a winner only as far as the intervals allow. */
#include "agents/finalists.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* P(Bin(n, 1/2) < k), summed in doubles: n is at most KG_MAX_RETIME. */
static double binom_below(int n, int k)
{
	double p = 0, c = 1; /* C(n, 0) */
	for (int i = 0; i < k && i <= n; i++) {
		p += c;
		c = c * (n - i) / (i + 1);
	}
	return p / ldexp(1.0, n);
}

void kg_median_interval(double *x, int n, double level, struct kg_interval *ci)
{
	memset(ci, 0, sizeof(*ci));
	if (n <= 0)
		return;
	qsort(x, (size_t)n, sizeof(double), cmp_double);
	ci->n = n;
	ci->median = n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
	int k = 1;
	while (k + 1 <= (n + 1) / 2 && 1 - 2 * binom_below(n, k + 1) >= level)
		k++;
	ci->lo = x[k - 1];
	ci->hi = x[n - k];
	ci->coverage = 1 - 2 * binom_below(n, k);
	if (ci->coverage < 0)
		ci->coverage = 0;
}

void kg_finalists_decide(struct kg_finalist *f, int n, double level, struct kg_decision *d)
{
	memset(d, 0, sizeof(*d));
	d->winner = -1;
	int top = -1;
	for (int i = 0; i < n; i++) {
		double tmp[KG_MAX_RETIME];
		memcpy(tmp, f[i].samples, (size_t)f[i].n * sizeof(double));
		kg_median_interval(tmp, f[i].n, level, &f[i].ci);
		if (f[i].disqualified || !f[i].n)
			continue;
		if (top < 0 || f[i].ci.median > f[top].ci.median ||
		    (f[i].ci.median == f[top].ci.median && f[i].order < f[top].order))
			top = i;
	}
	if (top < 0)
		return;
	/* The group that cannot be told apart from the fastest: it and every finalist whose interval
	 * reaches into its own. The earliest of them wins; the rest are reported as tied. */
	int group[KG_MAX_FINALISTS], ng = 0, winner = top;
	for (int i = 0; i < n && ng < KG_MAX_FINALISTS; i++) {
		if (i != top && (f[i].disqualified || !f[i].n || f[i].ci.hi < f[top].ci.lo))
			continue;
		group[ng++] = i;
		if (f[i].order < f[winner].order)
			winner = i;
	}
	for (int g = 0; g < ng; g++)
		if (group[g] != winner)
			d->tied[d->n_tied++] = group[g];
	d->winner = winner;
	d->significant = d->n_tied == 0;
	d->faster_than_reference = f[winner].ci.lo > 1.0;
}

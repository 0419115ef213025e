/* The CPU peer of `make bench`: a plain, unhardened harness of the kind a team writes first. It
 * compiles the reference and the candidate with cc (as kgate does), then per trial draws fresh
 * inputs, runs both in this one process and compares with allclose. No sandbox, no canaries, no
 * secret seeds, one thread: the floor a hardened gate is measured against.
 * Usage: plain_harness REF.c CAND.c ROWS COLS TRIALS ATOL RTOL (a 2-D fp32 in -> 2-D fp32 out task). */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <kgate/kernel.h>

typedef int (*forward_fn)(const kg_tensor *, int, kg_tensor *, int, void *);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static forward_fn build(const char *src, const char *dir, const char *tag, const char *inc)
{
	char so[4200], cmd[9000];
	snprintf(so, sizeof(so), "%s/%s.so", dir, tag);
	snprintf(cmd, sizeof(cmd), "cc -std=gnu11 -O2 -fPIC -shared -I%s -o %s %s -lm", inc, so, src);
	if (system(cmd))
		return NULL;
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	return h ? (forward_fn)(uintptr_t)dlsym(h, "kg_forward") : NULL;
}

static uint64_t rng_state;
/* uniform in [-3, 3) from xorshift64: about the cheapest draw there is, so that the peer's input
 * cost is a floor (kgate draws every class, normal ones included, from a keyed stream) */
static float draw(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((double)(rng_state >> 11) * (6.0 / 9007199254740992.0) - 3.0);
}

int main(int argc, char **argv)
{
	if (argc != 8) {
		fprintf(stderr, "usage: %s REF.c CAND.c ROWS COLS TRIALS ATOL RTOL\n", argv[0]);
		return 2;
	}
	int64_t R = atoll(argv[3]), C = atoll(argv[4]);
	int trials = atoi(argv[5]);
	double atol = atof(argv[6]), rtol = atof(argv[7]);
	const char *home = getenv("KGATE_HOME");
	char inc[4200], dir[] = "/tmp/plain-harness-XXXXXX";
	snprintf(inc, sizeof(inc), "%s/include", home ? home : ".");
	if (!mkdtemp(dir))
		return 3;
	double t0 = now();
	forward_fn ref = build(argv[1], dir, "ref", inc), cand = build(argv[2], dir, "cand", inc);
	double t_compile = now() - t0;
	size_t n = (size_t)(R * C);
	float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *yr = malloc(n * sizeof(float));
	int bad = !ref || !cand || !x || !y || !yr;
	double t_gen = 0, t_ref = 0, t_cand = 0, t_cmp = 0;
	for (int t = 0; t < trials && !bad; t++) {
		double a = now();
		rng_state = 0x9e3779b97f4a7c15ull * (uint64_t)(t + 1);
		for (size_t i = 0; i < n; i++)
			x[i] = draw();
		double b = now();
		kg_tensor in = {.data = x, .dtype = KG_F32, .ndim = 2, .shape = {R, C}, .stride = {C, 1}};
		kg_tensor o = in, orf = in;
		o.data = y;
		orf.data = yr;
		bad |= ref(&in, 1, &orf, 1, NULL) != 0;
		double c = now();
		bad |= cand(&in, 1, &o, 1, NULL) != 0;
		double d = now();
		for (size_t i = 0; i < n; i++)
			if (!(fabs((double)y[i] - yr[i]) <= atol + rtol * fabs((double)yr[i])))
				bad = 1;
		double e = now();
		t_gen += b - a;
		t_ref += c - b;
		t_cand += d - c;
		t_cmp += e - d;
	}
	double total = now() - t0;
	printf("plain harness: %s in %.2f s = compile %.2f + inputs %.2f + reference %.2f + candidate %.2f + compare "
	       "%.2f (%d trials at %lldx%lld, one thread)\n",
	       bad ? "FAILED" : "passed", total, t_compile, t_gen, t_ref, t_cand, t_cmp, trials, (long long)R,
	       (long long)C);
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd)) {
	}
	free(x);
	free(y);
	free(yr);
	return bad;
}

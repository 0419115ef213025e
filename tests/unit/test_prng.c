/* Unit tests of the keyed generators: ChaCha20 against RFC 8439's vectors, key derivation and
 * parsing, determinism and independence of streams, rough distribution moments, and that input
 * classes produce what they promise (large_mean, constant_rows, near_duplicate among them). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verifier/plan/dtype.h"
#include "verifier/plan/inputs.h"
#include "verifier/plan/prng.h"

static void hex_bytes(const char *hex, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static void key_words(const uint8_t k[32], uint32_t w[8])
{
	for (int i = 0; i < 8; i++)
		w[i] = (uint32_t)k[4 * i] | (uint32_t)k[4 * i + 1] << 8 | (uint32_t)k[4 * i + 2] << 16 |
		       (uint32_t)k[4 * i + 3] << 24;
}

static void block_bytes(const uint8_t key[32], uint32_t counter, const uint8_t nonce[12], uint8_t out[64])
{
	uint32_t kw[8], nw[3], blk[16];
	key_words(key, kw);
	for (int i = 0; i < 3; i++)
		nw[i] = (uint32_t)nonce[4 * i] | (uint32_t)nonce[4 * i + 1] << 8 | (uint32_t)nonce[4 * i + 2] << 16 |
			(uint32_t)nonce[4 * i + 3] << 24;
	kg_chacha20_block(kw, counter, nw, blk);
	kg_chacha20_bytes(blk, out);
}

/* RFC 8439 section 2.3.2 (block function), appendix A.1 vectors 1 and 2 (zero key and nonce,
 * counters 0 and 1), and section 2.4.2 (the keystream XORed with the sunscreen text). */
static void test_chacha20_rfc8439(void **state)
{
	(void)state;
	uint8_t key[32], nonce[12], out[64], want[64];
	for (int i = 0; i < 32; i++)
		key[i] = (uint8_t)i;
	hex_bytes("000000090000004a00000000", nonce, 12);
	block_bytes(key, 1, nonce, out);
	hex_bytes("10f1e7e4d13b5915500fdd1fa32071c4c7d1f4c733c068030422aa9ac3d46c4e"
		  "d2826446079faa0914c2d705d98b02a2b5129cd1de164eb9cbd083e8a2503c4e",
		  want, 64);
	assert_memory_equal(out, want, 64);

	uint8_t zk[32] = {0}, zn[12] = {0};
	block_bytes(zk, 0, zn, out);
	hex_bytes("76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
		  "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
		  want, 64);
	assert_memory_equal(out, want, 64);
	block_bytes(zk, 1, zn, out);
	hex_bytes("9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
		  "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f",
		  want, 64);
	assert_memory_equal(out, want, 64);

	static const char text[] = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for "
				   "the future, sunscreen would be it.";
	hex_bytes("000000000000004a00000000", nonce, 12);
	block_bytes(key, 1, nonce, out);
	static const uint8_t cipher[16] = {0x6e, 0x2e, 0x35, 0x9a, 0x25, 0x68, 0xf9, 0x80,
					   0x41, 0xba, 0x07, 0x28, 0xdd, 0x0d, 0x69, 0x81};
	for (int i = 0; i < 16; i++)
		assert_int_equal(out[i] ^ (uint8_t)text[i], cipher[i]);

	/* four lanes at once: the same words as four single blocks, across a counter wrap too */
	uint32_t kw[8] = {1, 2, 3, 4, 5, 6, 7, 8}, nw[3] = {9, 10, 11}, four[4][16], one[16];
	const uint32_t counters[2] = {7, 0xfffffffeu};
	for (int c = 0; c < 2; c++) {
		kg_chacha20_block4(kw, counters[c], nw, four);
		for (int b = 0; b < 4; b++) {
			kg_chacha20_block(kw, counters[c] + (uint32_t)b, nw, one);
			assert_memory_equal(four[b], one, sizeof(one));
		}
	}
	/* and eight (AVX2 where the CPU has it) */
	const uint32_t c8[2] = {7, 0xfffffffcu};
	uint32_t eight[8][16];
	for (int c = 0; c < 2; c++) {
		kg_chacha20_block8(kw, c8[c], nw, eight);
		for (int b = 0; b < 8; b++) {
			kg_chacha20_block(kw, c8[c] + (uint32_t)b, nw, one);
			assert_memory_equal(eight[b], one, sizeof(one));
		}
	}
}

static void test_streams(void **state)
{
	(void)state;
	kg_key k = {{1, 2, 3, 4, 5, 6, 7, 8}}, k2 = k;
	k2.w[7] ^= 1;
	kg_prng a, b;
	kg_prng_init(&a, &k, 5, 42);
	kg_prng_init(&b, &k, 5, 42);
	for (int i = 0; i < 1000; i++)
		assert_true(kg_prng_next(&a) == kg_prng_next(&b));
	/* another id, another n0, another key: unrelated streams */
	kg_prng c[3];
	kg_prng_init(&a, &k, 5, 42);
	kg_prng_init(&c[0], &k, 5, 43);
	kg_prng_init(&c[1], &k, 6, 42);
	kg_prng_init(&c[2], &k2, 5, 42);
	int same = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = kg_prng_next(&a);
		for (int j = 0; j < 3; j++)
			same += x == kg_prng_next(&c[j]);
	}
	assert_int_equal(same, 0);
	/* derived keys: per domain and id, and never a word of a stream of the parent */
	kg_key d1, d2, d3;
	kg_key_derive(&k, KG_DOM_CANARY, 0, &d1);
	kg_key_derive(&k, KG_DOM_INPUTS, 0, &d2);
	kg_key_derive(&k, KG_DOM_CANARY, 1, &d3);
	assert_memory_not_equal(&d1, &d2, sizeof(d1));
	assert_memory_not_equal(&d1, &d3, sizeof(d1));
	uint64_t w = kg_key_u64(&k, KG_DOM_CANARY, 0);
	assert_true(w != ((uint64_t)d1.w[0] | (uint64_t)d1.w[1] << 32));
	assert_true(kg_seed_derive(1, 1) != kg_seed_derive(1, 2));
}

static void test_key_text(void **state)
{
	(void)state;
	kg_key k, back, a, b, c;
	char hex[KG_KEY_HEX_LEN + 1];
	assert_int_equal(kg_key_fresh(&k), 0);
	kg_key_hex(&k, hex);
	assert_int_equal(strlen(hex), 64);
	assert_int_equal(kg_key_parse(hex, &back), 0);
	assert_memory_equal(&k, &back, sizeof(k));
	/* a short seed is hashed into a full key: stable, and "42" is not "042" */
	assert_int_equal(kg_key_parse("42", &a), 0);
	assert_int_equal(kg_key_parse("42", &b), 0);
	assert_int_equal(kg_key_parse("042", &c), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_memory_not_equal(&a, &c, sizeof(a));
	assert_int_not_equal(a.w[7], 0);
	assert_int_equal(kg_key_parse("", &a), -EINVAL);
	kg_key f2;
	assert_int_equal(kg_key_fresh(&f2), 0);
	assert_memory_not_equal(&k, &f2, sizeof(k));
}

static void test_moments(void **state)
{
	(void)state;
	kg_key k = {{7}};
	kg_prng r;
	kg_prng_init(&r, &k, 0, 7);
	double s = 0, s2 = 0, us = 0;
	const int n = 200000;
	for (int i = 0; i < n; i++) {
		double x = kg_prng_normal(&r);
		s += x;
		s2 += x * x;
		double u = kg_prng_uniform(&r);
		assert_true(u >= 0 && u < 1);
		us += u;
	}
	assert_true(fabs(s / n) < 0.01);
	assert_true(fabs(s2 / n - 1.0) < 0.02);
	assert_true(fabs(us / n - 0.5) < 0.01);
	/* the normal's shape (ziggurat): kurtosis 3, the tail past the base strip (3.44) and far
	 * out, and a histogram of 0.25-wide bins over [-4, 4] against the exact probabilities */
	const int m = 2000000;
	double s4 = 0;
	int past3 = 0, past4 = 0, hist[32] = {0};
	for (int i = 0; i < m; i++) {
		double x = kg_prng_normal(&r);
		s4 += x * x * x * x;
		past3 += fabs(x) > 3.5;
		past4 += fabs(x) > 4.5;
		if (x > -4 && x < 4)
			hist[(int)((x + 4) * 4)]++;
	}
	assert_true(fabs(s4 / m - 3.0) < 0.05);
	assert_true(fabs(past3 - m * 4.6525e-4) < 5 * sqrt(m * 4.6525e-4)); /* P(|x| > 3.5) */
	assert_true(fabs(past4 - m * 6.795e-6) < 5 * sqrt(m * 6.795e-6) + 1); /* P(|x| > 4.5) */
	double chi2 = 0;
	for (int b = 0; b < 32; b++) {
		double lo = -4 + b * 0.25, p = 0.5 * (erf((lo + 0.25) / sqrt(2.0)) - erf(lo / sqrt(2.0)));
		chi2 += (hist[b] - m * p) * (hist[b] - m * p) / (m * p);
	}
	assert_true(chi2 < 70); /* 31 degrees of freedom: 70 is past p = 1e-4 */
	for (int i = 0; i < 1000; i++)
		assert_true(kg_prng_below(&r, 3) < 3);
}

static const kg_key *K(uint32_t s)
{
	static kg_key keys[128];
	keys[s % 128].w[0] = s;
	return &keys[s % 128];
}

/* Filling is independent of how many threads did it: the result depends on the seed only. */
static void test_fill_classes(void **state)
{
	(void)state;
	const size_t n = 3u << 20; /* three chunks */
	int64_t shape[2] = {3 << 10, 1 << 10};
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	assert_non_null(a);
	assert_non_null(b);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, K(99), 0);
	kg_inputs_fill(b, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, K(99), 0);
	assert_memory_equal(a, b, n * sizeof(float));
	kg_inputs_fill(b, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, KG_CLASS_ALL, K(100), 0);
	assert_memory_not_equal(a, b, n * sizeof(float));

	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NEGATIVE, KG_CLASS_ALL, K(1), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(a[i] < 0);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_ZEROS, KG_CLASS_ALL, K(1), 0);
	for (size_t i = 0; i < n; i++)
		assert_true(a[i] == 0);
	/* weights never take the degenerate classes */
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_WEIGHT, KG_CLASS_ZEROS, KG_CLASS_ALL, K(1), 0);
	int nonzero = 0;
	for (size_t i = 0; i < n; i++)
		nonzero += a[i] != 0;
	assert_true(nonzero > (int)(n / 2));
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_SORTED, KG_CLASS_ALL, K(1), 0);
	for (size_t i = 1; i < n; i++)
		if (i % (size_t)shape[1])
			assert_true(a[i] > a[i - 1]);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_TINY, KG_CLASS_ALL, K(1), 0);
	int denormal = 0;
	for (size_t i = 0; i < n; i++) {
		assert_true(fabsf(a[i]) < 1e-25f);
		denormal += a[i] != 0 && fpclassify(a[i]) == FP_SUBNORMAL;
	}
	assert_true(denormal > 1000);
	kg_inputs_fill(a, KG_F32, n, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_SPECIAL, KG_CLASS_ALL, K(1), 0);
	int nans = 0, infs = 0;
	for (size_t i = 0; i < n; i++) {
		nans += isnan(a[i]);
		infs += isinf(a[i]) != 0;
	}
	assert_true(nans > 1000 && infs > 2000);
	free(a);
	free(b);
}

static void test_identity(void **state)
{
	(void)state;
	int64_t shape[2] = {5, 5};
	float m[25];
	kg_inputs_fill(m, KG_F32, 25, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_IDENTITY, KG_CLASS_ALL, K(3), 0);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++)
			assert_true(m[i * 5 + j] == (i == j ? 1.0f : 0.0f));
}

/* The classes kgate 0.1 lacked. */
static void test_new_classes(void **state)
{
	(void)state;
	enum { R = 64, C = 1000 };
	int64_t shape[2] = {R, C};
	float *a = malloc(R * C * sizeof(float));
	assert_non_null(a);
	/* large_mean: |mean| in [16, 32) against a unit spread, where E[x^2]-E[x]^2 in fp32 fails */
	kg_inputs_fill(a, KG_F32, R * C, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_LARGE_MEAN, KG_CLASS_ALL, K(5), 0);
	double s = 0, s2 = 0;
	for (int i = 0; i < R * C; i++)
		s += a[i];
	double mean = s / (R * C);
	for (int i = 0; i < R * C; i++)
		s2 += (a[i] - mean) * (a[i] - mean);
	assert_true(fabs(mean) >= 15.9 && fabs(mean) < 32.1);
	assert_true(fabs(sqrt(s2 / (R * C)) - 1.0) < 0.05);
	float fs = 0, fs2 = 0; /* the one-pass fp32 variance of one row is far off */
	for (int i = 0; i < C; i++)
		fs += a[i], fs2 += a[i] * a[i];
	float fm = fs / C, fvar = fs2 / C - fm * fm;
	double dm = 0, dv = 0;
	for (int i = 0; i < C; i++)
		dm += a[i];
	dm /= C;
	for (int i = 0; i < C; i++)
		dv += (a[i] - dm) * (a[i] - dm);
	dv /= C;
	assert_true(fabs(fvar - dv) / dv > 1e-4);
	/* weights keep their normal values */
	kg_inputs_fill(a, KG_F32, R * C, shape, 2, KG_ROLE_WEIGHT, KG_CLASS_LARGE_MEAN, KG_CLASS_ALL, K(5), 0);
	assert_true(fabsf(a[0]) < 12 && fabsf(a[1]) < 12);

	/* constant_rows: one value per row, rows differ */
	kg_inputs_fill(a, KG_F32, R * C, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_CONSTANT_ROWS, KG_CLASS_ALL, K(6), 1);
	for (int r = 0; r < R; r++) {
		for (int c = 1; c < C; c++)
			assert_true(a[r * C + c] == a[r * C]);
		if (r)
			assert_true(a[r * C] != a[(r - 1) * C]);
	}
	/* rows that straddle the 1 Mi-element chunks stay constant */
	int64_t big[2] = {3, 700000};
	float *b = malloc(3 * 700000 * sizeof(float));
	assert_non_null(b);
	kg_inputs_fill(b, KG_F32, 3 * 700000, big, 2, KG_ROLE_ACTIVATION, KG_CLASS_CONSTANT_ROWS, KG_CLASS_ALL, K(6), 1);
	for (int r = 0; r < 3; r++)
		for (int c = 1; c < 700000; c++)
			assert_true(b[r * 700000 + c] == b[r * 700000]);
	free(b);

	/* near_duplicate: each row equals row 0 in most places, and no two rows are equal */
	kg_inputs_fill(a, KG_F32, R * C, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_NEAR_DUPLICATE, KG_CLASS_ALL, K(7), 0);
	for (int r = 1; r < R; r++) {
		int eq = 0;
		for (int c = 0; c < C; c++)
			eq += a[r * C + c] == a[c];
		assert_true(eq > C * 3 / 4);
		assert_true(eq < C);
	}
	free(a);
}

static void test_half_conversions(void **state)
{
	(void)state;
	assert_int_equal(kg_f32_to_f16(1.0f), 0x3c00);
	assert_int_equal(kg_f32_to_f16(-2.0f), 0xc000);
	assert_int_equal(kg_f32_to_f16(65504.0f), 0x7bff);
	assert_int_equal(kg_f32_to_f16(1e6f), 0x7c00);
	assert_true(kg_f16_to_f32(0x0001) == 5.9604644775390625e-08f);
	assert_true(isnan(kg_f16_to_f32(kg_f32_to_f16(NAN))));
	for (uint32_t h = 0; h < 0x7c00; h++)
		assert_int_equal(kg_f32_to_f16(kg_f16_to_f32((uint16_t)h)), h);
	assert_int_equal(kg_f32_to_bf16(1.0f), 0x3f80);
	assert_true(kg_bf16_to_f32(0x3f80) == 1.0f);
	assert_true(isnan(kg_bf16_to_f32(kg_f32_to_bf16(NAN))));
	/* round to nearest even: 1 + 2^-8 is halfway between two bf16 values */
	assert_int_equal(kg_f32_to_bf16(1.00390625f), 0x3f80);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_chacha20_rfc8439), cmocka_unit_test(test_streams),
		cmocka_unit_test(test_key_text),         cmocka_unit_test(test_moments),
		cmocka_unit_test(test_fill_classes),     cmocka_unit_test(test_new_classes),
		cmocka_unit_test(test_identity),         cmocka_unit_test(test_half_conversions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* The keyed input generator's per-element core, one source compiled for the host (the verifier's
 * inputs.c and the CPU tests) and for the device (device/kernels.cu, run by kgate-device): element
 * i of a tensor is a function of the trial key, the tensor's parameters and i alone (counter-based),
 * so any range is computed without the elements before it, by a host thread or a GPU thread, and
 * both give the same bits. Only integer arithmetic and IEEE basic operations (+ - * / and sqrt,
 * correctly rounded on both) are used: exp and log are this file's own, and nothing may be
 * contracted into an FMA (-std=c11 on the host, -fmad=false for nvcc), or the two sides differ.
 *
 * Streams: ChaCha20 (RFC 8439) under the trial key with nonce (STREAM(tensor, n), id). Element i
 * takes one 64-bit word of the block (KG_GEN_S_ELEM, i / 8) at its place in it; the rare element
 * that needs more (a ziggurat retry, a near-duplicate's move) reads its own stream
 * (KG_GEN_S_EXTRA, i). A row's parameters come from row streams, a near-duplicate base row's
 * element k from (KG_GEN_S_BASE, k). */
#ifndef KG_GEN_H
#define KG_GEN_H

#include <stdint.h>

#ifdef __CUDACC__
#define KG_GEN_FN static __host__ __device__ inline
#else
#define KG_GEN_FN static inline
#endif

/* What an element is drawn as; the verifier maps a trial's class and a tensor's role onto it
 * (inputs.c), the core only samples. */
enum kg_gen_kind {
	KG_GEN_NORMAL = 1, /* offset + scale * N(0,1) (large_mean too, by its offset) */
	KG_GEN_UNIFORM, /* offset + scale * U(-1,1) */
	KG_GEN_LARGE, /* +-magnitude * U(0.5,1.5) */
	KG_GEN_TINY, /* half tiny normal values, half the dtype's denormals */
	KG_GEN_ZEROS,
	KG_GEN_ONES,
	KG_GEN_NEGATIVE, /* -|scale * N| - 1e-3 */
	KG_GEN_SPECIAL, /* N(0,1), 1 % NaN, 1 % +Inf, 1 % -Inf */
	KG_GEN_IDENTITY, /* the trailing square matrix's identity (N(0,1) where not square) */
	KG_GEN_SORTED, /* each row ascending through (-1, 1) */
	KG_GEN_CONSTANT_ROWS, /* every element of a row the row's one value */
	KG_GEN_NEAR_DUPLICATE, /* every row the base row, ~1 element in 16 moved */
	KG_GEN_SPIKED, /* offset + scale * N, one outlier per row */
	KG_GEN_MIXED, /* each row one of mix[], with parameters of its own */
	KG_GEN_INT, /* integers: u8 uniform in [0, 255], others in [-1000, 1000] */
	KG_GEN_LARGE_MEAN, /* NORMAL with a mean far above the spread; a mixed row draws its own */
	KG_GEN_KIND_END_
};

/* the element types (kgate/kernel.h's kg_dtype values) */
enum { KG_GEN_F32 = 0, KG_GEN_F16 = 1, KG_GEN_BF16 = 2, KG_GEN_I32 = 3, KG_GEN_I64 = 4, KG_GEN_U8 = 5, KG_GEN_BOOL = 6 };

#define KG_GEN_MAX_MIX 16
/* A tensor's stream: its number's low 7 bits in the top byte (the top bit stays clear: the
 * verifier's own streams have it set, prng.c), the rest folded into the stream code's bits 4-23,
 * so that a whole model's inputs (hundreds) each have streams of their own, and inputs 0-127 keep
 * the streams they always had. Numbers below KG_GEN_MAX_TENSOR are told apart. */
#define KG_GEN_MAX_TENSOR 65536u
#define KG_GEN_STREAM(t, n) \
	(((uint32_t)(t) & 0x7fu) << 24 | (((uint32_t)(n) ^ ((uint32_t)(t) >> 7 << 4)) & 0xffffffu))
#define KG_GEN_S_ELEM 0xfffff0u
#define KG_GEN_S_EXTRA 0xfffff1u
#define KG_GEN_S_BASE 0xfffffeu
#define KG_GEN_S_ROW 0xfffffdu
#define KG_GEN_S_SPIKE 0xfffffcu
#define KG_GEN_S_MIX 0xfffffbu

/* One tensor's draw: fixed-size and pointer-free, as kgate-device receives it (wire.h). */
struct kg_gen_tensor {
	uint64_t n; /* elements */
	uint64_t rowlen; /* the last dimension, >= 1 */
	uint64_t mat; /* identity: the trailing square matrix's side (0: not square) */
	double offset, scale; /* the tensor's own */
	double magnitude; /* large */
	uint32_t kind; /* enum kg_gen_kind */
	uint32_t dtype;
	uint32_t tensor; /* the input's number: its streams */
	uint32_t n_mix;
	uint32_t mix[KG_GEN_MAX_MIX]; /* mixed: the kinds a row may take (no MIXED, ZEROS, ONES, IDENTITY, INT) */
};

/* The ziggurat's tables (Marsaglia and Tsang 2000, 128 layers), from kg_gen_zig_init. */
struct kg_gen_zig {
	uint32_t k[128];
	double w[128], f[128];
};

/* ---- ChaCha20 ---- */
#define KG_GEN_ROTL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))
#define KG_GEN_QR(a, b, c, d)                                            \
	do {                                                             \
		a += b, d ^= a, d = KG_GEN_ROTL(d, 16);                  \
		c += d, b ^= c, b = KG_GEN_ROTL(b, 12);                  \
		a += b, d ^= a, d = KG_GEN_ROTL(d, 8);                   \
		c += d, b ^= c, b = KG_GEN_ROTL(b, 7);                   \
	} while (0)

/* Set k's key of a batched call (wire.h's sets): the call's own for set 0, and for every other set
 * a key of its own, so that no two sets of a call hold the same draw. */
KG_GEN_FN void kg_gen_set_key(const uint32_t key[8], uint32_t set, uint32_t out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = key[i];
	out[7] ^= set * 0x9e3779b9u;
	out[6] ^= set;
}

KG_GEN_FN void kg_gen_block(const uint32_t key[8], uint32_t counter, uint32_t n0, uint32_t n1, uint32_t n2,
			    uint32_t out[16])
{
	uint32_t in[16] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u, key[0], key[1], key[2], key[3],
			   key[4],      key[5],      key[6],      key[7],      counter, n0,     n1,     n2};
	uint32_t x[16];
	for (int i = 0; i < 16; i++)
		x[i] = in[i];
	for (int r = 0; r < 10; r++) {
		KG_GEN_QR(x[0], x[4], x[8], x[12]);
		KG_GEN_QR(x[1], x[5], x[9], x[13]);
		KG_GEN_QR(x[2], x[6], x[10], x[14]);
		KG_GEN_QR(x[3], x[7], x[11], x[15]);
		KG_GEN_QR(x[0], x[5], x[10], x[15]);
		KG_GEN_QR(x[1], x[6], x[11], x[12]);
		KG_GEN_QR(x[2], x[7], x[8], x[13]);
		KG_GEN_QR(x[3], x[4], x[9], x[14]);
	}
	for (int i = 0; i < 16; i++)
		out[i] = x[i] + in[i];
}

/* A stream of 64-bit words, (key, STREAM, id), blocks from counter 0, computed when first read. */
struct kg_gen_stream {
	const uint32_t *key;
	uint32_t n0, n1, n2, counter;
	uint32_t buf[16];
	int pos;
};

KG_GEN_FN void kg_gen_stream_init(struct kg_gen_stream *s, const uint32_t *key, uint32_t stream, uint64_t id)
{
	s->key = key;
	s->n0 = stream;
	s->n1 = (uint32_t)id;
	s->n2 = (uint32_t)(id >> 32);
	s->counter = 0;
	s->pos = 16;
}

KG_GEN_FN uint64_t kg_gen_next(struct kg_gen_stream *s)
{
	if (s->pos >= 16) {
		kg_gen_block(s->key, s->counter++, s->n0, s->n1, s->n2, s->buf);
		s->pos = 0;
	}
	uint64_t v = (uint64_t)s->buf[s->pos] | (uint64_t)s->buf[s->pos + 1] << 32;
	s->pos += 2;
	return v;
}

/* the word element i draws first: word pair i % 8 of the block (S_ELEM, i / 8) */
KG_GEN_FN uint64_t kg_gen_word_of(const uint32_t blk[16], uint64_t i)
{
	unsigned w = (unsigned)(i & 7) * 2;
	return (uint64_t)blk[w] | (uint64_t)blk[w + 1] << 32;
}

KG_GEN_FN void kg_gen_elem_block(const uint32_t key[8], uint32_t tensor, uint64_t group, uint32_t out[16])
{
	kg_gen_block(key, (uint32_t)group, KG_GEN_STREAM(tensor, KG_GEN_S_ELEM), (uint32_t)(group >> 32), 0, out);
}

/* ---- arithmetic both sides do alike ---- */
KG_GEN_FN double kg_gen_unit(uint64_t u) /* [0, 1), 53 bits */
{
	return (double)(u >> 11) * (1.0 / 9007199254740992.0);
}

KG_GEN_FN uint64_t kg_gen_mulhi(uint64_t a, uint64_t b)
{
	uint64_t al = (uint32_t)a, ah = a >> 32, bl = (uint32_t)b, bh = b >> 32;
	uint64_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
	uint64_t mid = (ll >> 32) + (uint32_t)lh + (uint32_t)hl;
	return hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
}

/* [0, n) from a 64-bit word by a multiply (bias below n / 2^64: none a test can see) */
KG_GEN_FN uint64_t kg_gen_below(uint64_t u, uint64_t n)
{
	return kg_gen_mulhi(u, n);
}

KG_GEN_FN double kg_gen_fabs(double x)
{
	return x < 0 ? -x : x;
}

KG_GEN_FN double kg_gen_bits_double(uint64_t b)
{
	union {
		uint64_t u;
		double d;
	} x;
	x.u = b;
	return x.d;
}

KG_GEN_FN uint64_t kg_gen_double_bits(double d)
{
	union {
		uint64_t u;
		double d;
	} x;
	x.d = d;
	return x.u;
}

/* e^x to ~1e-16 relative: x = k ln2 + r, |r| <= ln2/2, Taylor to r^14, times 2^k built from bits */
KG_GEN_FN double kg_gen_exp(double x)
{
	if (x != x)
		return x;
	if (x > 709.0)
		return kg_gen_bits_double(0x7ff0000000000000ull);
	if (x < -745.0)
		return 0.0;
	double kd = x * 1.4426950408889634;
	int64_t k = (int64_t)(kd < 0 ? kd - 0.5 : kd + 0.5);
	double r = (x - (double)k * 6.93147180369123816490e-01) - (double)k * 1.90821492927058770002e-10;
	double p = 1.0 / 87178291200.0;
	const double c[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
			      1.0 / 362880.0,	  1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
			      1.0 / 120.0,	  1.0 / 24.0,	     1.0 / 6.0,	       0.5,
			      1.0,		  1.0};
	for (int i = 0; i < 14; i++)
		p = p * r + c[i];
	/* 2^k in two steps, so that a denormal result is one rounding, not a flush */
	int64_t k1 = k / 2, k2 = k - k1;
	double s1 = kg_gen_bits_double((uint64_t)(k1 + 1023) << 52), s2 = kg_gen_bits_double((uint64_t)(k2 + 1023) << 52);
	return p * s1 * s2;
}

/* ln x for x > 0 (0 -> -inf): x = m 2^e, m in [sqrt(1/2), sqrt(2)), 2 atanh((m-1)/(m+1)) */
KG_GEN_FN double kg_gen_log(double x)
{
	if (!(x > 0))
		return x == 0 ? -kg_gen_bits_double(0x7ff0000000000000ull) : kg_gen_bits_double(0x7ff8000000000000ull);
	uint64_t b = kg_gen_double_bits(x);
	int e = (int)(b >> 52) - 1023;
	if (e == -1023) { /* denormal: normalise by 2^54 */
		b = kg_gen_double_bits(x * 18014398509481984.0);
		e = (int)(b >> 52) - 1023 - 54;
	}
	double m = kg_gen_bits_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
	if (m > 1.4142135623730951) {
		m *= 0.5;
		e++;
	}
	double s = (m - 1.0) / (m + 1.0), s2 = s * s, p = 0;
	for (int i = 23; i >= 3; i -= 2)
		p = (p + 1.0 / (double)i) * s2;
	return (double)e * 6.93147180369123816490e-01 + ((double)e * 1.90821492927058770002e-10 + 2.0 * s * (1.0 + p));
}

KG_GEN_FN double kg_gen_exp10(double x)
{
	return kg_gen_exp(x * 2.302585092994045684);
}

#ifndef __CUDA_ARCH__
#include <math.h>
/* Host only: the tables from the deterministic exp and log and sqrt (correctly rounded), so that
 * any process computes the same; kgate-device copies them to the device. */
static inline void kg_gen_zig_init(struct kg_gen_zig *z)
{
	const double m = 2147483648.0, v = 9.91256303526217e-3, R = 3.442619855899;
	double d = R, t = d, q = v / kg_gen_exp(-0.5 * d * d);
	z->k[0] = (uint32_t)((d / q) * m);
	z->k[1] = 0;
	z->w[0] = q / m;
	z->w[127] = d / m;
	z->f[0] = 1.0;
	z->f[127] = kg_gen_exp(-0.5 * d * d);
	for (int i = 126; i >= 1; i--) {
		d = sqrt(-2.0 * kg_gen_log(v / d + kg_gen_exp(-0.5 * d * d)));
		z->k[i + 1] = (uint32_t)((d / t) * m);
		t = d;
		z->f[i] = kg_gen_exp(-0.5 * d * d);
		z->w[i] = d / m;
	}
}
#endif

/* N(0,1) by the ziggurat from u, element i's first word; the ~1 % that miss the fast path go on in
 * *x (the element's own stream). The layer is u's low 7 bits, the value its high 32: bits 7..31 are
 * left for the kinds that draw something beside the value. */
KG_GEN_FN double kg_gen_normal(const struct kg_gen_zig *z, uint64_t u, struct kg_gen_stream *x)
{
	const double R = 3.442619855899;
	for (;;) {
		int32_t h = (int32_t)(uint32_t)(u >> 32);
		int li = (int)(u & 127);
		uint32_t a = h < 0 ? (uint32_t)0 - (uint32_t)h : (uint32_t)h;
		double v = (double)h * z->w[li];
		if (a < z->k[li])
			return v;
		if (li == 0) { /* the tail beyond R */
			double t, y;
			do {
				t = -kg_gen_log(1.0 - kg_gen_unit(kg_gen_next(x))) / R;
				y = -kg_gen_log(1.0 - kg_gen_unit(kg_gen_next(x)));
			} while (y + y < t * t);
			return h > 0 ? R + t : -R - t;
		}
		if (z->f[li] + kg_gen_unit(kg_gen_next(x)) * (z->f[li - 1] - z->f[li]) < kg_gen_exp(-0.5 * v * v))
			return v;
		u = kg_gen_next(x);
	}
}

/* ---- rows ---- */
struct kg_gen_row {
	uint32_t kind;
	double offset, scale;
	double value; /* constant rows */
	uint64_t spike_col; /* spiked: where the outlier sits, and its value */
	double spike;
};

/* large_mean's |mean| lower bound per dtype (inputs.h's kg_inputs_large_mean_lo) */
KG_GEN_FN double kg_gen_large_mean_lo(uint32_t dtype)
{
	return dtype == KG_GEN_F32 ? 16.0 : 4.0;
}

/* A row's parameters from streams of its own (rows straddle any split of the work): a mixed row's
 * kind, offset and scale; a constant row's value; a spiked row's outlier. */
KG_GEN_FN void kg_gen_row_enter(const struct kg_gen_tensor *t, const uint32_t *key, const struct kg_gen_zig *z,
				uint64_t row, struct kg_gen_row *p)
{
	p->kind = t->kind;
	p->offset = t->offset;
	p->scale = t->scale;
	p->value = p->spike = 0;
	p->spike_col = 0;
	if (t->kind == KG_GEN_MIXED) {
		struct kg_gen_stream m;
		kg_gen_stream_init(&m, key, KG_GEN_STREAM(t->tensor, KG_GEN_S_MIX), row);
		uint32_t n_mix = t->n_mix >= 1 && t->n_mix <= KG_GEN_MAX_MIX ? t->n_mix : 1;
		p->kind = t->n_mix ? t->mix[kg_gen_below(kg_gen_next(&m), n_mix)] : KG_GEN_NORMAL;
		uint64_t w = kg_gen_next(&m);
		if (p->kind == KG_GEN_LARGE_MEAN) { /* a mean far above the unit spread */
			double lo = kg_gen_large_mean_lo(t->dtype);
			p->offset = (w & 1 ? lo : -lo) * (1.0 + kg_gen_unit(kg_gen_next(&m)));
			p->scale = 1.0;
		} else if (p->kind != KG_GEN_NEAR_DUPLICATE) { /* a near copy keeps the tensor's */
			p->offset = (2.0 * kg_gen_unit(w) - 1.0) * (t->dtype == KG_GEN_F16 ? 0.5 : 1.0);
			p->scale = kg_gen_exp10(1.2 * kg_gen_unit(kg_gen_next(&m)) - 0.6);
		}
	}
	if (p->kind == KG_GEN_CONSTANT_ROWS) {
		struct kg_gen_stream s;
		kg_gen_stream_init(&s, key, KG_GEN_STREAM(t->tensor, KG_GEN_S_ROW), row);
		p->value = p->offset + p->scale * kg_gen_normal(z, kg_gen_next(&s), &s);
	} else if (p->kind == KG_GEN_SPIKED) {
		/* One outlier per row at a secret column, 100 to 120 spreads (at least 100) from the
		 * row's offset: exp() of it overflows fp32 (past 88.7) without the max subtracted, and
		 * so does exp() of it less any other element of the row (at most ~5 spreads from the
		 * offset), so no guard that looks at some elements rather than the maximum survives;
		 * finite in every float dtype (|value| < 500, f16's largest is 65504). */
		struct kg_gen_stream s;
		kg_gen_stream_init(&s, key, KG_GEN_STREAM(t->tensor, KG_GEN_S_SPIKE), row);
		p->spike_col = kg_gen_below(kg_gen_next(&s), t->rowlen);
		double sign = kg_gen_next(&s) & 1 ? 1.0 : -1.0;
		double sc = p->scale > 1.0 ? p->scale : 1.0;
		p->spike = p->offset + sign * sc * (100.0 + 20.0 * kg_gen_unit(kg_gen_next(&s)));
	}
}

KG_GEN_FN int kg_gen_per_row(const struct kg_gen_tensor *t)
{
	return t->kind == KG_GEN_CONSTANT_ROWS || t->kind == KG_GEN_SPIKED || t->kind == KG_GEN_MIXED;
}

/* whether element values need keystream at all (zeros, ones, constant rows and a square identity
 * do not: their words are not computed) */
KG_GEN_FN int kg_gen_keyless(const struct kg_gen_tensor *t)
{
	return t->kind == KG_GEN_ZEROS || t->kind == KG_GEN_ONES || (t->kind == KG_GEN_IDENTITY && t->mat);
}

/* ---- elements ---- */
/* A near-duplicate tensor's base row, element col. */
KG_GEN_FN double kg_gen_base(const struct kg_gen_tensor *t, const uint32_t *key, const struct kg_gen_zig *z,
			     uint64_t col)
{
	struct kg_gen_stream b;
	kg_gen_stream_init(&b, key, KG_GEN_STREAM(t->tensor, KG_GEN_S_BASE), col);
	return t->offset + t->scale * kg_gen_normal(z, kg_gen_next(&b), &b);
}

/* Element i's value; u is its first word (kg_gen_word_of), p its row's parameters; base, when not
 * NULL, the base row made beforehand (kg_gen_base of every column), else each is made here. */
KG_GEN_FN double kg_gen_value(const struct kg_gen_tensor *t, const uint32_t *key, const struct kg_gen_zig *z,
			      const struct kg_gen_row *p, uint64_t i, uint64_t u, const double *base)
{
	struct kg_gen_stream x;
	kg_gen_stream_init(&x, key, KG_GEN_STREAM(t->tensor, KG_GEN_S_EXTRA), i);
	switch (p->kind) {
	case KG_GEN_NORMAL:
	case KG_GEN_LARGE_MEAN:
		return p->offset + p->scale * kg_gen_normal(z, u, &x);
	case KG_GEN_UNIFORM:
		return p->offset + p->scale * (2.0 * kg_gen_unit(u) - 1.0);
	case KG_GEN_LARGE:
		return (u & 1 ? 1.0 : -1.0) * t->magnitude * (0.5 + kg_gen_unit(u));
	case KG_GEN_TINY: {
		double s = t->dtype == KG_GEN_F16 ? 1e-6 : t->dtype == KG_GEN_F32 ? 1e-40 : 1e-39;
		if (!(u >> 7 & 1))
			s = t->dtype == KG_GEN_F16 ? 1e-3 : 1e-30;
		return kg_gen_normal(z, u, &x) * s;
	}
	case KG_GEN_ZEROS:
		return 0.0;
	case KG_GEN_ONES:
		return 1.0;
	case KG_GEN_NEGATIVE:
		return -kg_gen_fabs(p->scale * kg_gen_normal(z, u, &x)) - 1e-3;
	case KG_GEN_SPECIAL: {
		uint64_t c = ((u >> 8) & 0xffffffu) * 100u >> 24;
		if (c == 0)
			return kg_gen_bits_double(0x7ff8000000000000ull);
		if (c == 1)
			return kg_gen_bits_double(0x7ff0000000000000ull);
		if (c == 2)
			return -kg_gen_bits_double(0x7ff0000000000000ull);
		return kg_gen_normal(z, u, &x);
	}
	case KG_GEN_IDENTITY: {
		if (!t->mat)
			return kg_gen_normal(z, u, &x);
		uint64_t in_mat = i % (t->mat * t->mat);
		return in_mat / t->mat == in_mat % t->mat ? 1.0 : 0.0;
	}
	case KG_GEN_SORTED: {
		uint64_t col = i % t->rowlen;
		return -1.0 + (2.0 * (double)col + kg_gen_unit(u)) / (double)t->rowlen;
	}
	case KG_GEN_CONSTANT_ROWS:
		return p->value;
	case KG_GEN_NEAR_DUPLICATE: {
		/* every row the same base row, but for about one element in 16 moved by a tenth of the
		 * spread: equal almost everywhere, yet no two rows have the same result */
		uint64_t col = i % t->rowlen;
		double v = base ? base[col] : kg_gen_base(t, key, z, col);
		if (!(u >> 8 & 15))
			v += 0.1 * p->scale * kg_gen_normal(z, kg_gen_next(&x), &x);
		return v;
	}
	case KG_GEN_SPIKED:
		if (i % t->rowlen == p->spike_col)
			return p->spike;
		return p->offset + p->scale * kg_gen_normal(z, u, &x);
	case KG_GEN_INT:
		if (t->dtype == KG_GEN_U8)
			return (double)(u & 255);
		if (t->dtype == KG_GEN_BOOL) /* a mask: each element true or false alike */
			return (double)(u >> 17 & 1);
		return (double)(int64_t)kg_gen_below(u, 2001) - 1000.0;
	default:
		return 0.0;
	}
}

/* ---- stores (verifier/plan/dtype.c's rounding: to f32 first, then to nearest even) ---- */
KG_GEN_FN int kg_gen_is_int(uint32_t dt)
{
	return dt == KG_GEN_I32 || dt == KG_GEN_I64 || dt == KG_GEN_U8 || dt == KG_GEN_BOOL;
}

KG_GEN_FN unsigned kg_gen_dtype_size(uint32_t dt)
{
	return dt == KG_GEN_F32 || dt == KG_GEN_I32			? 4
	       : dt == KG_GEN_F16 || dt == KG_GEN_BF16		? 2
	       : dt == KG_GEN_I64					? 8
	       : dt == KG_GEN_U8 || dt == KG_GEN_BOOL		? 1
									: 0;
}

KG_GEN_FN uint32_t kg_gen_float_bits(float f)
{
	union {
		uint32_t u;
		float f;
	} x;
	x.f = f;
	return x.u;
}

KG_GEN_FN uint16_t kg_gen_to_f16(float f)
{
	uint32_t x = kg_gen_float_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u, exp = (x >> 23) & 0xffu, man = x & 0x7fffffu;
	if (exp == 0xff)
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000u;
		int shift = 14 - e;
		uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)h;
}

KG_GEN_FN uint16_t kg_gen_to_bf16(float f)
{
	uint32_t x = kg_gen_float_bits(f);
	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
		return (uint16_t)((x >> 16) | 0x40u);
	x += 0x7fffu + ((x >> 16) & 1u);
	return (uint16_t)(x >> 16);
}

/* an f16's value, exactly (every f16 is an f32) */
KG_GEN_FN float kg_gen_from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
	if (exp == 0) {
		if (!man) {
			bits = sign;
		} else {
			int e = -1;
			do {
				man <<= 1;
				e++;
			} while (!(man & 0x400u));
			bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | (man << 13);
	} else {
		bits = sign | ((exp - 15 + 127) << 23) | (man << 13);
	}
	union {
		uint32_t u;
		float f;
	} x;
	x.u = bits;
	return x.f;
}

/* v is an integer in range for KG_GEN_INT, ZEROS and ONES: the only kinds integer tensors get */
KG_GEN_FN void kg_gen_store(void *dst, uint32_t dt, uint64_t i, double v)
{
	switch (dt) {
	case KG_GEN_F32:
		((float *)dst)[i] = (float)v;
		break;
	case KG_GEN_F16:
		((uint16_t *)dst)[i] = kg_gen_to_f16((float)v);
		break;
	case KG_GEN_BF16:
		((uint16_t *)dst)[i] = kg_gen_to_bf16((float)v);
		break;
	case KG_GEN_I32:
		((int32_t *)dst)[i] = (int32_t)v;
		break;
	case KG_GEN_I64:
		((int64_t *)dst)[i] = (int64_t)v;
		break;
	case KG_GEN_U8:
		((uint8_t *)dst)[i] = (uint8_t)v;
		break;
	case KG_GEN_BOOL:
		((uint8_t *)dst)[i] = v != 0.0;
		break;
	default:
		break;
	}
}

/* 1 when t is a draw the core can make: a known kind and dtype, rows and mix in bounds, n * size
 * == bytes. Integer tensors only as INT, ZEROS or ONES. */
KG_GEN_FN int kg_gen_valid(const struct kg_gen_tensor *t, uint64_t bytes)
{
	unsigned es = kg_gen_dtype_size(t->dtype);
	if (!es || t->kind < KG_GEN_NORMAL || t->kind >= KG_GEN_KIND_END_ || !t->rowlen || t->tensor >= KG_GEN_MAX_TENSOR ||
	    t->n > (UINT64_MAX >> 4) || t->n * es != bytes || (t->mat && t->mat > 0xffffffffu))
		return 0;
	if (kg_gen_is_int(t->dtype) != (t->kind == KG_GEN_INT) && t->kind != KG_GEN_ZEROS && t->kind != KG_GEN_ONES)
		return 0;
	if (t->kind == KG_GEN_MIXED) {
		if (!t->n_mix || t->n_mix > KG_GEN_MAX_MIX)
			return 0;
		for (uint32_t k = 0; k < t->n_mix; k++) {
			uint32_t m = t->mix[k];
			if (m < KG_GEN_NORMAL || m >= KG_GEN_KIND_END_ || m == KG_GEN_MIXED || m == KG_GEN_ZEROS ||
			    m == KG_GEN_ONES || m == KG_GEN_IDENTITY || m == KG_GEN_INT)
				return 0;
		}
	}
	return 1;
}

/* Elements [lo, hi) of t into dst (dst[k] is element k: dst is the tensor's base), one group of 8
 * (a ChaCha block) at a time; what a device thread and a host chunk both run. */
KG_GEN_FN void kg_gen_range(const struct kg_gen_tensor *t, const uint32_t *key, const struct kg_gen_zig *z,
			    void *dst, uint64_t lo, uint64_t hi)
{
	struct kg_gen_row row;
	uint64_t cur_row = ~(uint64_t)0;
	int per_row = kg_gen_per_row(t), keyless = kg_gen_keyless(t) || t->kind == KG_GEN_CONSTANT_ROWS;
	uint32_t blk[16];
	uint64_t blk_group = ~(uint64_t)0;
	if (!per_row)
		kg_gen_row_enter(t, key, z, 0, &row);
	for (uint64_t i = lo; i < hi; i++) {
		if (per_row && i / t->rowlen != cur_row) {
			cur_row = i / t->rowlen;
			kg_gen_row_enter(t, key, z, cur_row, &row);
		}
		uint64_t u = 0;
		if (!keyless) {
			if (i >> 3 != blk_group) {
				blk_group = i >> 3;
				kg_gen_elem_block(key, t->tensor, blk_group, blk);
			}
			u = kg_gen_word_of(blk, i);
		}
		kg_gen_store(dst, t->dtype, i, kg_gen_value(t, key, z, &row, i, u, 0));
	}
}

#endif

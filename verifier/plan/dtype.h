/* Element types of the candidate ABI: sizes, names and conversions to and from double, so that
 * generation and comparison are written once for every dtype. */
#ifndef KG_DTYPE_H
#define KG_DTYPE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

size_t kg_dtype_size(kg_dtype t);
const char *kg_dtype_name(kg_dtype t);
/* 0 on success; -EINVAL for an unknown name. */
int kg_dtype_parse(const char *name, kg_dtype *out);
int kg_dtype_is_float(kg_dtype t);


uint16_t kg_f32_to_f16(float f);
float kg_f16_to_f32(uint16_t h);
uint16_t kg_f32_to_bf16(float f);
float kg_bf16_to_f32(uint16_t h);

/* A pass over whole tensors, written once for every dtype and inlined into callers that pass
 * KG_F32 as a constant, so the fp32 loop is plain. */
#define KG_HOT static inline __attribute__((always_inline))

/* Inline, so that a pass over a gigabyte tensor written for any dtype compiles, where the caller
 * passes a constant dtype, to a plain load (compare.c, checks.c): a call and a switch per element
 * cost more than the arithmetic around them. */
static inline double kg_load(const void *base, kg_dtype t, size_t i)
{
	switch (t) {
	case KG_F32:
		return ((const float *)base)[i];
	case KG_F16:
		return kg_f16_to_f32(((const uint16_t *)base)[i]);
	case KG_BF16:
		return kg_bf16_to_f32(((const uint16_t *)base)[i]);
	case KG_I32:
		return ((const int32_t *)base)[i];
	case KG_I64:
		return (double)((const int64_t *)base)[i];
	case KG_U8:
	case KG_BOOL: /* the byte as stored: a true written as 2 reads 2, and is not 1 */
		return ((const uint8_t *)base)[i];
	}
	return __builtin_nan("");
}

/* NaN to 0, then clamped: what an integer tensor can hold of a double */
static inline double kg_clampd(double v, double lo, double hi)
{
	if (isnan(v))
		return 0;
	return v < lo ? lo : v > hi ? hi : v;
}

/* Stores v rounded to the dtype (round-to-nearest-even for f16/bf16, saturating for integers). */
static inline void kg_store(void *base, kg_dtype t, size_t i, double v)
{
	switch (t) {
	case KG_F32:
		((float *)base)[i] = (float)v;
		break;
	case KG_F16:
		((uint16_t *)base)[i] = kg_f32_to_f16((float)v);
		break;
	case KG_BF16:
		((uint16_t *)base)[i] = kg_f32_to_bf16((float)v);
		break;
	case KG_I32:
		((int32_t *)base)[i] = (int32_t)llround(kg_clampd(v, INT32_MIN, INT32_MAX));
		break;
	case KG_I64:
		((int64_t *)base)[i] = (int64_t)llround(kg_clampd(v, -9.2e18, 9.2e18));
		break;
	case KG_U8:
		((uint8_t *)base)[i] = (uint8_t)lround(kg_clampd(v, 0, 255));
		break;
	case KG_BOOL:
		((uint8_t *)base)[i] = v != 0 && !isnan(v);
		break;
	}
}

#endif

/* dtype table and the scalar conversions. f16 and bf16 are converted by bit manipulation so the
 * verifier does not depend on compiler support for _Float16. */
#include "verifier/dtype.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
	int is_float;
} dtypes[] = {
	[KG_F32] = {"f32", 4, 1}, [KG_F16] = {"f16", 2, 1}, [KG_BF16] = {"bf16", 2, 1},
	[KG_I32] = {"i32", 4, 0}, [KG_I64] = {"i64", 8, 0}, [KG_U8] = {"u8", 1, 0},
};

static int valid(kg_dtype t)
{
	return (unsigned)t < sizeof(dtypes) / sizeof(dtypes[0]);
}

size_t kg_dtype_size(kg_dtype t)
{
	return valid(t) ? dtypes[t].size : 0;
}

const char *kg_dtype_name(kg_dtype t)
{
	return valid(t) ? dtypes[t].name : "?";
}

int kg_dtype_is_float(kg_dtype t)
{
	return valid(t) && dtypes[t].is_float;
}

int kg_dtype_parse(const char *name, kg_dtype *out)
{
	static const struct {
		const char *alias;
		kg_dtype t;
	} aliases[] = {{"float32", KG_F32}, {"float16", KG_F16}, {"half", KG_F16}, {"bfloat16", KG_BF16},
		       {"int32", KG_I32}, {"int64", KG_I64}, {"uint8", KG_U8}};
	for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++) {
		if (!strcmp(name, dtypes[i].name)) {
			*out = (kg_dtype)i;
			return 0;
		}
	}
	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
		if (!strcmp(name, aliases[i].alias)) {
			*out = aliases[i].t;
			return 0;
		}
	}
	return -EINVAL;
}

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t kg_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u;
	uint32_t exp = (x >> 23) & 0xffu;
	uint32_t man = x & 0x7fffffu;
	if (exp == 0xff) /* Inf or NaN; keep NaN quiet and non-zero */
		return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
	int e = (int)exp - 127 + 15;
	if (e >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (e <= 0) {
		if (e < -10)
			return (uint16_t)sign;
		man |= 0x800000u;
		int shift = 14 - e;
		uint32_t half = man >> shift;
		uint32_t rem = man & ((1u << shift) - 1);
		uint32_t mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (half & 1)))
			half++;
		return (uint16_t)(sign | half);
	}
	uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
	uint32_t rem = man & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++; /* may carry into the exponent, which is the right rounding to Inf */
	return (uint16_t)h;
}

float kg_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	if (exp == 0) {
		if (!man)
			return bits_f32(sign);
		/* subnormal: normalise */
		int e = -1;
		do {
			man <<= 1;
			e++;
		} while (!(man & 0x400u));
		man &= 0x3ffu;
		return bits_f32(sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13));
	}
	if (exp == 31)
		return bits_f32(sign | 0x7f800000u | (man << 13));
	return bits_f32(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

uint16_t kg_f32_to_bf16(float f)
{
	uint32_t x = f32_bits(f);
	if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
		return (uint16_t)((x >> 16) | 0x40u);
	uint32_t lsb = (x >> 16) & 1u;
	x += 0x7fffu + lsb;
	return (uint16_t)(x >> 16);
}

float kg_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}


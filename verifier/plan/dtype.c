/* dtype table and the scalar conversions. f16 and bf16 are converted by bit manipulation (the
 * generator's core, common/kg_gen.h, which kgate-device runs too) so the verifier does not depend
 * on compiler support for _Float16. */
#include "verifier/plan/dtype.h"

#include "kg_gen.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const struct {
	const char *name;
	size_t size;
	int is_float;
} dtypes[] = {
	[KG_F32] = {"f32", 4, 1}, [KG_F16] = {"f16", 2, 1}, [KG_BF16] = {"bf16", 2, 1},
	[KG_I32] = {"i32", 4, 0}, [KG_I64] = {"i64", 8, 0}, [KG_U8] = {"u8", 1, 0}, [KG_BOOL] = {"bool", 1, 0},
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

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, 4);
	return f;
}

uint16_t kg_f32_to_f16(float f)
{
	return kg_gen_to_f16(f);
}

float kg_f16_to_f32(uint16_t h)
{
	return kg_gen_from_f16(h);
}

uint16_t kg_f32_to_bf16(float f)
{
	return kg_gen_to_bf16(f);
}

float kg_bf16_to_f32(uint16_t h)
{
	return bits_f32((uint32_t)h << 16);
}

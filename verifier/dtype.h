/* Element types of the candidate ABI: sizes, names and conversions to and from double, so that
 * generation and comparison are written once for every dtype. */
#ifndef KG_DTYPE_H
#define KG_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#include <kgate/kernel.h>

size_t kg_dtype_size(kg_dtype t);
const char *kg_dtype_name(kg_dtype t);
/* 0 on success; -EINVAL for an unknown name. */
int kg_dtype_parse(const char *name, kg_dtype *out);
int kg_dtype_is_float(kg_dtype t);

double kg_load(const void *base, kg_dtype t, size_t i);
/* Stores v rounded to the dtype (round-to-nearest-even for f16/bf16, saturating for integers). */
void kg_store(void *base, kg_dtype t, size_t i, double v);

uint16_t kg_f32_to_f16(float f);
float kg_f16_to_f32(uint16_t h);
uint16_t kg_f32_to_bf16(float f);
float kg_bf16_to_f32(uint16_t h);

#endif

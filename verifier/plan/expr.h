/* Integer arithmetic over named dimensions, for shapes ("(H-K+1)/2") and cost formulas
 * ("2*N*N*N") in task manifests. Overflow and division by zero are errors, never UB. */
#ifndef KG_EXPR_H
#define KG_EXPR_H

#include <stddef.h>
#include <stdint.h>

#define KG_MAX_SYMS 16
#define KG_SYM_LEN 32

typedef struct kg_dims {
	int n;
	char name[KG_MAX_SYMS][KG_SYM_LEN];
	int64_t val[KG_MAX_SYMS];
} kg_dims;

/* Sets (or adds) name = v; -ENOSPC when full, -EINVAL for a bad name. */
int kg_dims_set(kg_dims *d, const char *name, int64_t v);
/* 0 and *v when known, -ENOENT otherwise. */
int kg_dims_get(const kg_dims *d, const char *name, int64_t *v);

/* Evaluates expr: integers, dimension names, + - * / % ( ), unary minus, min(a,b), max(a,b).
 * Division truncates. On error returns -EINVAL / -ERANGE / -EDOM with a message in err. */
int kg_expr_eval(const char *expr, const kg_dims *d, int64_t *out, char *err, size_t errsz);

#endif

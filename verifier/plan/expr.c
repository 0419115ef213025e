/* A recursive-descent evaluator for the small expression language of task manifests. Manifests
 * are input from users, so every path returns an error instead of trusting the text. */
#include "verifier/plan/expr.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

int kg_dims_set(kg_dims *d, const char *name, int64_t v)
{
	size_t len = strlen(name);
	if (!len || len >= KG_SYM_LEN || !(isalpha((unsigned char)name[0]) || name[0] == '_'))
		return -EINVAL;
	for (int i = 0; i < d->n; i++) {
		if (!strcmp(d->name[i], name)) {
			d->val[i] = v;
			return 0;
		}
	}
	if (d->n >= KG_MAX_SYMS)
		return -ENOSPC;
	memcpy(d->name[d->n], name, len + 1);
	d->val[d->n++] = v;
	return 0;
}

int kg_dims_get(const kg_dims *d, const char *name, int64_t *v)
{
	for (int i = 0; i < d->n; i++) {
		if (!strcmp(d->name[i], name)) {
			*v = d->val[i];
			return 0;
		}
	}
	return -ENOENT;
}

struct parser {
	const char *s;
	const char *p;
	const kg_dims *d;
	char *err;
	size_t errsz;
	int rc;
	int depth;
};

static int64_t fail(struct parser *ps, int rc, const char *what)
{
	if (!ps->rc) {
		ps->rc = rc;
		snprintf(ps->err, ps->errsz, "%s at column %d of \"%s\"", what, (int)(ps->p - ps->s) + 1, ps->s);
	}
	return 0;
}

static void skip_ws(struct parser *ps)
{
	while (isspace((unsigned char)*ps->p))
		ps->p++;
}

static int64_t parse_sum(struct parser *ps);

static int64_t checked(struct parser *ps, int ok, int64_t v)
{
	return ok ? v : fail(ps, -ERANGE, "integer overflow");
}

static int64_t parse_primary(struct parser *ps)
{
	skip_ws(ps);
	if (ps->rc)
		return 0;
	if (++ps->depth > 64)
		return fail(ps, -EINVAL, "expression nested too deeply");
	int64_t v = 0;
	char c = *ps->p;
	if (c == '(') {
		ps->p++;
		v = parse_sum(ps);
		skip_ws(ps);
		if (*ps->p != ')')
			v = fail(ps, -EINVAL, "expected ')'");
		else
			ps->p++;
	} else if (c == '-') {
		ps->p++;
		int64_t x = parse_primary(ps), neg;
		int ok = !__builtin_sub_overflow((int64_t)0, x, &neg);
		v = checked(ps, ok, neg);
	} else if (isdigit((unsigned char)c)) {
		while (isdigit((unsigned char)*ps->p)) {
			int ok = !__builtin_mul_overflow(v, 10, &v) && !__builtin_add_overflow(v, *ps->p - '0', &v);
			if (!ok) {
				ps->depth--;
				return fail(ps, -ERANGE, "number too large");
			}
			ps->p++;
		}
	} else if (isalpha((unsigned char)c) || c == '_') {
		char name[KG_SYM_LEN];
		size_t n = 0;
		while (isalnum((unsigned char)*ps->p) || *ps->p == '_') {
			if (n + 1 >= sizeof(name)) {
				ps->depth--;
				return fail(ps, -EINVAL, "name too long");
			}
			name[n++] = *ps->p++;
		}
		name[n] = '\0';
		skip_ws(ps);
		if ((!strcmp(name, "min") || !strcmp(name, "max")) && *ps->p == '(') {
			ps->p++;
			int64_t a = parse_sum(ps);
			skip_ws(ps);
			if (*ps->p != ',') {
				ps->depth--;
				return fail(ps, -EINVAL, "expected ','");
			}
			ps->p++;
			int64_t b = parse_sum(ps);
			skip_ws(ps);
			if (*ps->p != ')') {
				ps->depth--;
				return fail(ps, -EINVAL, "expected ')'");
			}
			ps->p++;
			v = name[1] == 'i' ? (a < b ? a : b) : (a > b ? a : b);
		} else if (kg_dims_get(ps->d, name, &v)) {
			char msg[96];
			snprintf(msg, sizeof(msg), "unknown dimension '%s'", name);
			ps->depth--;
			return fail(ps, -EINVAL, msg);
		}
	} else {
		v = fail(ps, -EINVAL, c ? "unexpected character" : "unexpected end");
	}
	ps->depth--;
	return v;
}

static int64_t parse_product(struct parser *ps)
{
	int64_t v = parse_primary(ps);
	for (;;) {
		skip_ws(ps);
		char op = *ps->p;
		if (ps->rc || (op != '*' && op != '/' && op != '%'))
			return v;
		ps->p++;
		int64_t r = parse_primary(ps);
		if (op == '*') {
			int64_t prod;
			int ok = !__builtin_mul_overflow(v, r, &prod);
			v = checked(ps, ok, prod);
		} else if (r == 0) {
			return fail(ps, -EDOM, "division by zero");
		} else if (v == INT64_MIN && r == -1) {
			return fail(ps, -ERANGE, "integer overflow");
		} else {
			v = op == '/' ? v / r : v % r;
		}
	}
}

static int64_t parse_sum(struct parser *ps)
{
	int64_t v = parse_product(ps);
	for (;;) {
		skip_ws(ps);
		char op = *ps->p;
		if (ps->rc || (op != '+' && op != '-'))
			return v;
		ps->p++;
		int64_t r = parse_product(ps);
		int ovf = op == '+' ? __builtin_add_overflow(v, r, &v) : __builtin_sub_overflow(v, r, &v);
		v = checked(ps, !ovf, v);
	}
}

int kg_expr_eval(const char *expr, const kg_dims *d, int64_t *out, char *err, size_t errsz)
{
	struct parser ps = {.s = expr, .p = expr, .d = d, .err = err, .errsz = errsz};
	int64_t v = parse_sum(&ps);
	skip_ws(&ps);
	if (!ps.rc && *ps.p)
		fail(&ps, -EINVAL, "unexpected trailing text");
	if (ps.rc)
		return ps.rc;
	*out = v;
	return 0;
}

/* The tuner's core: parsing a template's `kgate:tune` directives (every malformed one is an error
 * naming its file and line, never a silently smaller space), expanding a setting into a candidate
 * source, and choosing the settings of a round. Pure functions of their inputs: the plugin is
 * stateless across rounds, so a resumed search proposes what the interrupted one would have. */
#include "plugins/tuner/tune.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEMPLATE (1u << 20)
#define DIRECTIVE "kgate:tune"
#define MARKER "/* kgate:tuned "

static int is_ident_start(int c)
{
	return isalpha(c) || c == '_';
}

static int is_ident(int c)
{
	return isalnum(c) || c == '_';
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* A value is one preprocessor token a macro can stand for: a number (optionally signed, with
 * suffixes: 4, -1, 0x10, 1.5f) or an identifier (a type, a constant). */
static int parse_value(const char *p, const char *end, char *out, const char **next)
{
	const char *q = p;
	if (q < end && (*q == '-' || *q == '+'))
		q++;
	if (q >= end)
		return -1;
	int number = isdigit((unsigned char)*q) || *q == '.';
	if (!number && (q != p || !is_ident_start((unsigned char)*q)))
		return -1;
	while (q < end && (is_ident((unsigned char)*q) || (number && *q == '.')))
		q++;
	if (q - p >= KG_TUNE_MAX_VALUE)
		return -1;
	memcpy(out, p, (size_t)(q - p));
	out[q - p] = '\0';
	*next = q;
	return 0;
}

#define BAD(...) kg_err(e, -EINVAL, __VA_ARGS__)

/* One directive starting at d (the 'k' of kgate:tune) on line [ls, le). */
static int parse_directive(const char *path, int line, const char *ls, const char *le, const char *d,
			   struct kg_tune_space *s, kg_error *e)
{
	/* Only a comment may hold one: text elsewhere would reach the compiler. */
	const char *b = d;
	while (b > ls && (b[-1] == ' ' || b[-1] == '\t'))
		b--;
	int block = b - ls >= 2 && b[-2] == '/' && b[-1] == '*';
	int linec = b - ls >= 2 && b[-2] == '/' && b[-1] == '/';
	if (!block && !linec)
		return BAD("%s:%d: a kgate:tune directive must open a comment: /* kgate:tune NAME = {1, 2} */", path,
			   line);
	const char *p = d + strlen(DIRECTIVE);
	if (p >= le || (*p != ' ' && *p != '\t'))
		return BAD("%s:%d: expected 'kgate:tune NAME = {v1, v2, ...}'", path, line);
	p = skip_blank(p, le);
	const char *n0 = p;
	if (p >= le || !is_ident_start((unsigned char)*p))
		return BAD("%s:%d: expected a parameter name (a C identifier) after kgate:tune", path, line);
	while (p < le && is_ident((unsigned char)*p))
		p++;
	if (p - n0 >= KG_TUNE_MAX_NAME)
		return BAD("%s:%d: parameter name longer than %d characters", path, line, KG_TUNE_MAX_NAME - 1);
	char name[KG_TUNE_MAX_NAME];
	memcpy(name, n0, (size_t)(p - n0));
	name[p - n0] = '\0';
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->p[i].name, name))
			return BAD("%s:%d: parameter %s declared again (first at line %d)", path, line, name, s->p[i].line);
	if (s->n >= KG_TUNE_MAX_PARAMS)
		return BAD("%s:%d: more than %d tunable parameters", path, line, KG_TUNE_MAX_PARAMS);
	p = skip_blank(p, le);
	if (p >= le || *p != '=')
		return BAD("%s:%d: expected '=' after %s", path, line, name);
	p = skip_blank(p + 1, le);
	if (p >= le || *p != '{')
		return BAD("%s:%d: expected '{' to open the values of %s", path, line, name);
	struct kg_tune_param *t = &s->p[s->n];
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->line = line;
	p++;
	for (;;) {
		p = skip_blank(p, le);
		if (p < le && *p == '}' && t->n == 0)
			return BAD("%s:%d: %s has no values", path, line, name);
		char v[KG_TUNE_MAX_VALUE];
		const char *q;
		if (parse_value(p, le, v, &q))
			return BAD("%s:%d: %s: expected a value (a number or an identifier) at '%.16s'", path, line, name,
				   p < le ? p : "end of line");
		for (int i = 0; i < t->n; i++)
			if (!strcmp(t->values[i], v))
				return BAD("%s:%d: %s: value %s listed twice", path, line, name, v);
		if (t->n >= KG_TUNE_MAX_VALUES)
			return BAD("%s:%d: %s: more than %d values", path, line, name, KG_TUNE_MAX_VALUES);
		snprintf(t->values[t->n++], KG_TUNE_MAX_VALUE, "%s", v);
		p = skip_blank(q, le);
		if (p < le && *p == ',') {
			p++;
			continue;
		}
		if (p < le && *p == '}')
			break;
		return BAD("%s:%d: %s: expected ',' or '}' after %s", path, line, name, v);
	}
	p = skip_blank(p + 1, le);
	if (block && !(le - p >= 2 && p[0] == '*' && p[1] == '/'))
		return BAD("%s:%d: %s: expected '*/' right after '}' (a directive is one line)", path, line, name);
	if (linec && p < le)
		return BAD("%s:%d: %s: unexpected text after '}'", path, line, name);
	s->n++;
	return 0;
}

int kg_tune_parse(const char *path, const char *text, struct kg_tune_space *s, kg_error *e)
{
	memset(s, 0, sizeof(*s));
	/* The name goes into a #line directive and into labels: plain characters only. */
	const char *base = strrchr(path, '/');
	snprintf(s->name, sizeof(s->name), "%s", base ? base + 1 : path);
	for (char *c = s->name; *c; c++)
		if (!isprint((unsigned char)*c) || *c == '"' || *c == '\\')
			*c = '_';
	size_t n = strlen(s->name);
	if (n > 3 && !strcmp(s->name + n - 3, ".cu"))
		s->cuda = 1;
	else if (!(n > 2 && !strcmp(s->name + n - 2, ".c")))
		return kg_err(e, -EINVAL, "%s: a template is a .c (CPU) or .cu (CUDA) file", path);
	if (!strncmp(text, MARKER, strlen(MARKER)))
		return kg_err(e, -EINVAL, "%s:1: this is a candidate the tuner generated, not a template", path);
	int line = 1, rc = 0;
	for (const char *ls = text; *ls; line++) {
		const char *le = strchr(ls, '\n');
		if (!le)
			le = ls + strlen(ls);
		for (const char *d = ls; d < le;) {
			const char *hit = memmem(d, (size_t)(le - d), DIRECTIVE, strlen(DIRECTIVE));
			if (!hit)
				break;
			if ((rc = parse_directive(path, line, ls, le, hit, s, e)))
				return rc;
			d = hit + strlen(DIRECTIVE);
		}
		ls = *le ? le + 1 : le;
	}
	if (!s->n)
		return kg_err(e, -EINVAL, "%s: no kgate:tune directive (e.g. /* kgate:tune BLOCK = {128, 256} */)", path);
	s->size = 1;
	for (int i = 0; i < s->n; i++)
		s->size = s->size > UINT64_MAX / (uint64_t)s->p[i].n ? UINT64_MAX : s->size * (uint64_t)s->p[i].n;
	if (!(s->body = strdup(text)))
		return kg_err(e, -ENOMEM, "out of memory");
	return 0;
}

int kg_tune_load(const char *path, struct kg_tune_space *s, kg_error *e)
{
	char *text = NULL;
	int rc = kg_read_file(path, MAX_TEMPLATE, &text, NULL, e);
	if (rc) {
		memset(s, 0, sizeof(*s));
		return rc;
	}
	rc = kg_tune_parse(path, text, s, e);
	free(text);
	return rc;
}

void kg_tune_free(struct kg_tune_space *s)
{
	free(s->body);
	s->body = NULL;
}

int kg_tune_label(const struct kg_tune_space *s, const kg_tune_point *pt, kg_buf *out)
{
	int rc = 0;
	for (int i = 0; i < s->n && !rc; i++)
		rc = kg_buf_printf(out, "%s%s=%s", i ? " " : "", s->p[i].name, s->p[i].values[pt->ix[i]]);
	return rc;
}

int kg_tune_parse_label(const struct kg_tune_space *s, const char *label, kg_tune_point *pt)
{
	int have[KG_TUNE_MAX_PARAMS] = {0}, got = 0;
	memset(pt, 0, sizeof(*pt));
	for (const char *p = label; *p;) {
		while (*p == ' ')
			p++;
		if (!*p)
			break;
		size_t tl = strcspn(p, " ");
		const char *eq = memchr(p, '=', tl);
		if (!eq)
			return -ENOENT;
		int found = 0;
		for (int i = 0; i < s->n && !found; i++) {
			if (strlen(s->p[i].name) != (size_t)(eq - p) || strncmp(s->p[i].name, p, (size_t)(eq - p)))
				continue;
			for (int k = 0; k < s->p[i].n && !found; k++)
				if (strlen(s->p[i].values[k]) == tl - (size_t)(eq - p) - 1 &&
				    !strncmp(s->p[i].values[k], eq + 1, tl - (size_t)(eq - p) - 1)) {
					found = 1;
					if (!have[i]++)
						got++;
					pt->ix[i] = (uint8_t)k;
				}
		}
		if (!found)
			return -ENOENT;
		p += tl;
	}
	return got == s->n ? 0 : -ENOENT;
}

int kg_tune_source(const struct kg_tune_space *s, const kg_tune_point *pt, kg_buf *out)
{
	/* The marker names the setting (and lets a seed's source be mapped back to it); #line keeps the
	 * compiler's messages on the template's own line numbers. */
	int rc = kg_buf_printf(out, "%s", MARKER);
	if (!rc)
		rc = kg_tune_label(s, pt, out);
	if (!rc)
		rc = kg_buf_printf(out, " */\n");
	for (int i = 0; i < s->n && !rc; i++)
		rc = kg_buf_printf(out, "#define %s %s\n", s->p[i].name, s->p[i].values[pt->ix[i]]);
	if (!rc)
		rc = kg_buf_printf(out, "#line 1 \"%s\"\n%s", s->name, s->body);
	return rc;
}

int kg_tune_source_label(const char *source, char *out, size_t outsz)
{
	if (strncmp(source, MARKER, strlen(MARKER)))
		return -ENOENT;
	const char *p = source + strlen(MARKER);
	const char *end = strstr(p, " */\n");
	const char *nl = strchr(p, '\n');
	if (!end || (nl && nl < end) || (size_t)(end - p) >= outsz)
		return -ENOENT;
	memcpy(out, p, (size_t)(end - p));
	out[end - p] = '\0';
	return 0;
}

/* ---- choosing settings ---- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int same(const struct kg_tune_space *s, const kg_tune_point *a, const kg_tune_point *b)
{
	return !memcmp(a->ix, b->ix, (size_t)s->n);
}

static int cmp_point(const struct kg_tune_space *s, const kg_tune_point *a, const kg_tune_point *b)
{
	return memcmp(a->ix, b->ix, (size_t)s->n);
}

struct picker {
	const struct kg_tune_space *s;
	const kg_tune_point *seen;
	int n_seen;
	kg_tune_point *out;
	int n, max;
};

/* Adds pt unless it was verified already or is already picked; 1 when added. */
static int pick(struct picker *k, const kg_tune_point *pt)
{
	if (k->n >= k->max)
		return 0;
	for (int i = 0; i < k->n_seen; i++)
		if (same(k->s, &k->seen[i], pt))
			return 0;
	for (int i = 0; i < k->n; i++)
		if (same(k->s, &k->out[i], pt))
			return 0;
	k->out[k->n++] = *pt;
	return 1;
}

/* The i-th setting in mixed-radix order, the last parameter fastest. */
static void nth(const struct kg_tune_space *s, uint64_t i, kg_tune_point *pt)
{
	memset(pt, 0, sizeof(*pt));
	for (int p = s->n - 1; p >= 0; p--) {
		pt->ix[p] = (uint8_t)(i % (uint64_t)s->p[p].n);
		i /= (uint64_t)s->p[p].n;
	}
}

static void grid_fill(struct picker *k)
{
	const struct kg_tune_space *s = k->s;
	for (uint64_t i = 0; i < s->size && k->n < k->max; i++) {
		kg_tune_point pt;
		nth(s, i, &pt);
		pick(k, &pt);
	}
}

static void random_fill(struct picker *k, uint64_t *rng)
{
	const struct kg_tune_space *s = k->s;
	/* Draws until enough new settings are found; a space mostly verified already falls back to
	 * walking it in order, so an unseen setting is never missed for want of luck. */
	for (int tries = 0; tries < 64 * k->max && k->n < k->max; tries++) {
		kg_tune_point pt;
		memset(&pt, 0, sizeof(pt));
		for (int p = 0; p < s->n; p++)
			pt.ix[p] = (uint8_t)(splitmix(rng) % (uint64_t)s->p[p].n);
		pick(k, &pt);
	}
	if (k->n < k->max && s->size <= (1u << 20))
		grid_fill(k);
}

static const struct kg_tune_space *sort_space; /* qsort has no context argument in C11 */

static int by_speedup(const void *a, const void *b)
{
	const struct kg_tune_result *x = a, *y = b;
	if (x->speedup != y->speedup)
		return x->speedup > y->speedup ? -1 : 1;
	return cmp_point(sort_space, &x->pt, &y->pt); /* equal speedups: a fixed order */
}

int kg_tune_next(const struct kg_tune_space *s, const struct kg_tune_plan *plan, const kg_tune_point *seen,
		 int n_seen, const struct kg_tune_result *ranked, int n_ranked, kg_tune_point *out, int max_out,
		 int *grid)
{
	struct picker k = {.s = s, .seen = seen, .n_seen = n_seen, .out = out, .max = max_out};
	if (plan->budget < k.max)
		k.max = plan->budget;
	if (k.max <= 0)
		return 0;
	uint64_t whole = (uint64_t)plan->budget * (uint64_t)(plan->rounds_total > 0 ? plan->rounds_total : 1);
	*grid = s->size <= plan->grid_max && s->size <= whole;
	if (*grid) {
		grid_fill(&k);
		return k.n;
	}
	uint64_t rng = plan->seed ^ (0x74756e6572ull * (uint64_t)(plan->round + 1));
	struct kg_tune_result *r = n_ranked ? malloc((size_t)n_ranked * sizeof(*r)) : NULL;
	int nr = 0;
	if (n_ranked && !r)
		return -ENOMEM;
	/* Best first, each setting once (a setting measured twice keeps its better figure). */
	if (n_ranked) {
		memcpy(r, ranked, (size_t)n_ranked * sizeof(*r));
		sort_space = s;
		qsort(r, (size_t)n_ranked, sizeof(*r), by_speedup);
		for (int i = 0; i < n_ranked; i++) {
			int dup = 0;
			for (int j = 0; j < nr && !dup; j++)
				dup = same(s, &r[j].pt, &r[i].pt);
			if (!dup)
				r[nr++] = r[i];
		}
	}
	if (nr && plan->round > 1) {
		/* Successive halving: each round keeps 1/eta of the previous round's survivors (the best
		 * settings measured so far) and spends its budget on their neighbourhoods, one step along
		 * one parameter, round-robin so every survivor gets its share. */
		int eta = plan->eta < 2 ? 2 : plan->eta;
		int keep = plan->budget;
		for (int i = 1; i < plan->round && keep > 1; i++)
			keep = (keep + eta - 1) / eta;
		if (keep > nr)
			keep = nr;
		for (int step = 1; step <= 2 && k.n < k.max; step++)
			for (int dir = 0; dir < 2 * s->n && k.n < k.max; dir++)
				for (int sv = 0; sv < keep && k.n < k.max; sv++) {
					kg_tune_point pt = r[sv].pt;
					int p = dir / 2, d = dir % 2 ? -step : step;
					int v = pt.ix[p] + d;
					if (v < 0 || v >= s->p[p].n)
						continue;
					pt.ix[p] = (uint8_t)v;
					pick(&k, &pt);
				}
	}
	random_fill(&k, &rng);
	free(r);
	return k.n;
}

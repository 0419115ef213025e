/* Getting code and ideas out of a model's free-form answer. Models fence code inconsistently
 * (```c, ```cuda, ```cpp, ```py, no label, ~~~, CRLF, several blocks, an answer cut off inside a
 * fence); this accepts all of those and keeps only blocks that are whole candidates (define
 * kg_forward, or for a ModelNew search a top-level class ModelNew). */
#include "plugins/llm/llm.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Labels whose blocks can be a candidate; anything else (json, bash, text) is prose. A ModelNew
 * module is Python; a C or CUDA candidate is in a C-family block. */
static const char *const code_langs[] = {"", "c", "cuda", "cu", "cpp", "c++", "cxx", "cc", "h", "hpp", "objc", NULL};
static const char *const python_langs[] = {"", "python", "py", "python3", "py3", NULL};

static int code_lang(const char *lang, Kgate__V1__Language want)
{
	const char *const *v = want == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? python_langs : code_langs;
	for (int i = 0; v[i]; i++)
		if (!strcmp(lang, v[i]))
			return 1;
	return 0;
}

/* A copy of text with CRLF and lone CR turned into LF. */
static char *normalize(const char *text)
{
	size_t n = strlen(text);
	char *s = malloc(n + 1), *d = s;
	if (!s)
		return NULL;
	for (const char *p = text; *p; p++) {
		if (*p == '\r') {
			*d++ = '\n';
			if (p[1] == '\n')
				p++;
		} else {
			*d++ = *p;
		}
	}
	*d = '\0';
	return s;
}

/* If line opens or closes a fence, returns its length (>= 3) and the fence char; else 0. */
static size_t fence_at(const char *line, char *ch, const char **info)
{
	int indent = 0;
	while (*line == ' ' && indent < 4)
		line++, indent++;
	if (indent > 3 || (*line != '`' && *line != '~'))
		return 0;
	size_t n = 0;
	while (line[n] == *line)
		n++;
	if (n < 3)
		return 0;
	*ch = *line;
	*info = line + n;
	return n;
}

static int push(struct kg_code_block **v, int *n, int *cap, const char *lang, const char *code, size_t len,
		int terminated)
{
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 4;
		struct kg_code_block *nv = realloc(*v, (size_t)nc * sizeof(**v));
		if (!nv)
			return -1;
		*v = nv;
		*cap = nc;
	}
	struct kg_code_block *b = &(*v)[*n];
	memset(b, 0, sizeof(*b));
	snprintf(b->lang, sizeof(b->lang), "%s", lang);
	b->code = malloc(len + 1);
	if (!b->code)
		return -1;
	memcpy(b->code, code, len);
	b->code[len] = '\0';
	b->terminated = terminated;
	(*n)++;
	return 0;
}

int kg_extract_blocks(const char *text, struct kg_code_block **out, int *n_out)
{
	*out = NULL;
	*n_out = 0;
	char *s = normalize(text ? text : "");
	if (!s)
		return -1;
	struct kg_code_block *v = NULL;
	int n = 0, cap = 0, rc = 0;
	const char *p = s;
	while (*p) {
		const char *eol = strchr(p, '\n');
		const char *next = eol ? eol + 1 : p + strlen(p);
		char ch;
		const char *info;
		size_t flen = fence_at(p, &ch, &info);
		/* A backtick fence's info string may not contain a backtick (CommonMark): "```x```"
		 * on one line is inline code, not a fence. */
		if (!flen || (ch == '`' && memchr(info, '`', (size_t)((eol ? eol : next) - info)))) {
			p = next;
			continue;
		}
		/* Language: first word of the info string, lower case, "{.c}" and "c {...}" tolerated. */
		char lang[16] = "";
		const char *q = info;
		while (*q == ' ' || *q == '\t' || *q == '{' || *q == '.')
			q++;
		size_t k = 0;
		while (q < next && *q && !isspace((unsigned char)*q) && *q != '}' && *q != '`' && k + 1 < sizeof(lang))
			lang[k++] = (char)tolower((unsigned char)*q++);
		lang[k] = '\0';
		const char *body = next, *b = next;
		int terminated = 0;
		while (*b) {
			const char *beol = strchr(b, '\n');
			const char *bnext = beol ? beol + 1 : b + strlen(b);
			char c2;
			const char *rest;
			size_t l2 = fence_at(b, &c2, &rest);
			if (l2 >= flen && c2 == ch) {
				while (*rest == ' ' || *rest == '\t')
					rest++;
				if (*rest == '\n' || !*rest) {
					terminated = 1;
					break;
				}
			}
			b = bnext;
		}
		if (push(&v, &n, &cap, lang, body, (size_t)(b - body), terminated)) {
			rc = -1;
			break;
		}
		if (!terminated)
			break;
		const char *beol = strchr(b, '\n');
		p = beol ? beol + 1 : b + strlen(b);
	}
	free(s);
	if (rc) {
		kg_free_blocks(v, n);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}

void kg_free_blocks(struct kg_code_block *b, int n)
{
	for (int i = 0; i < n; i++)
		free(b[i].code);
	free(b);
}

/* kg_forward followed by '(' : a definition or a declaration; a block that only mentions it in a
 * comment does not count, one that declares it without a body is rejected later by the compiler. */
static int defines_forward(const char *code)
{
	for (const char *p = strstr(code, "kg_forward"); p; p = strstr(p + 1, "kg_forward")) {
		const char *q = p + strlen("kg_forward");
		while (*q == ' ' || *q == '\t' || *q == '\n')
			q++;
		if (*q == '(' && (p == code || !(isalnum((unsigned char)p[-1]) || p[-1] == '_')))
			return 1;
	}
	return 0;
}

/* A top-level `class ModelNew(` or `class ModelNew:` at the start of a line: a module that only
 * mentions the name, or nests the class, is not a ModelNew module. */
static int defines_modelnew(const char *code)
{
	static const char kw[] = "class ModelNew";
	for (const char *p = strstr(code, kw); p; p = strstr(p + 1, kw)) {
		const char *q = p + strlen(kw);
		while (*q == ' ' || *q == '\t')
			q++;
		if ((p == code || p[-1] == '\n') && (*q == '(' || *q == ':'))
			return 1;
	}
	return 0;
}

static int is_candidate(const char *code, Kgate__V1__Language want)
{
	return want == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? defines_modelnew(code) : defines_forward(code);
}

int kg_extract_candidates(const char *text, Kgate__V1__Language lang, char **out, int max)
{
	struct kg_code_block *b;
	int n, k = 0;
	if (max <= 0 || kg_extract_blocks(text, &b, &n))
		return 0;
	for (int i = 0; i < n && k < max; i++) {
		if (!code_lang(b[i].lang, lang) || !is_candidate(b[i].code, lang))
			continue;
		/* Identical blocks (a model repeating itself) count once. */
		int dup = 0;
		for (int j = 0; j < k && !dup; j++)
			dup = !strcmp(out[j], b[i].code);
		if (dup)
			continue;
		out[k] = b[i].code;
		b[i].code = NULL;
		k++;
	}
	/* no fence at all: the whole answer, when it is plainly a source file of the language */
	if (n == 0 && text && is_candidate(text, lang) &&
	    strstr(text, lang == KGATE__V1__LANGUAGE__LANGUAGE_PYTHON ? "import torch" : "#include")) {
		char *s = normalize(text);
		if (s)
			out[k++] = s;
	}
	kg_free_blocks(b, n);
	return k;
}

static char *trim_dup(const char *s, size_t n)
{
	while (n && isspace((unsigned char)*s))
		s++, n--;
	while (n && isspace((unsigned char)s[n - 1]))
		n--;
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static int ideas_json(const char *text, char **out, int max)
{
	json_error_t err;
	json_t *a = json_loads(text, JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK, &err);
	int k = 0;
	if (!a)
		return 0;
	if (json_is_object(a)) { /* {"ideas": [...]} */
		json_t *in = json_object_get(a, "ideas");
		json_incref(in);
		json_decref(a);
		a = in;
	}
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *it = json_array_get(a, i);
		json_t *obj_idea = json_is_object(it) ? json_object_get(it, "idea") : NULL;
		const char *s = json_is_string(it) ? json_string_value(it) : json_string_value(obj_idea);
		if (s && *s && k < max && (out[k] = trim_dup(s, strlen(s))))
			k++;
	}
	json_decref(a);
	return k;
}

int kg_extract_ideas(const char *text, char **out, int max)
{
	if (max <= 0 || !text)
		return 0;
	struct kg_code_block *b;
	int n, k = 0;
	if (!kg_extract_blocks(text, &b, &n)) {
		for (int i = 0; i < n && !k; i++)
			if (!strcmp(b[i].lang, "json") || !b[i].lang[0])
				k = ideas_json(b[i].code, out, max);
		kg_free_blocks(b, n);
	}
	if (!k) {
		const char *lb = strchr(text, '[');
		if (lb)
			k = ideas_json(lb, out, max);
	}
	if (k)
		return k;
	/* Numbered or bulleted lines: "1. ...", "2) ...", "- ...", "* ...". */
	char *s = normalize(text);
	if (!s)
		return 0;
	for (char *line = strtok(s, "\n"); line && k < max; line = strtok(NULL, "\n")) {
		char *p = line;
		while (*p == ' ' || *p == '\t')
			p++;
		char *q = p;
		while (isdigit((unsigned char)*q))
			q++;
		if (q > p && (*q == '.' || *q == ')'))
			q++;
		else if (q == p && (*q == '-' || *q == '*'))
			q++;
		else
			continue;
		if (*q != ' ' && *q != '\t')
			continue;
		char *idea = trim_dup(q, strlen(q));
		if (idea && *idea)
			out[k++] = idea;
		else
			free(idea);
	}
	free(s);
	return k;
}

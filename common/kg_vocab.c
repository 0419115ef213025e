/* The vocabulary tables of kg_vocab.h expanded into arrays, with lookups both ways. Nothing here
 * is written twice: every name, text and mapping comes from the X-macro tables. */
#include "kg_vocab.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

struct reason_row {
	const char *name, *check, *short_text, *full_text;
	int exit_class;
};

static const struct reason_row reasons[KG_R_COUNT_] = {
#define KG_XX(e, name, cls, check, short_text, full_text) \
	[KG_R_##e] = {name, check, short_text, full_text, KG_EXITCLASS_##cls},
	KG_REASON_MAP(KG_XX)
#undef KG_XX
};

static const char *const class_names[KG_CLASS_COUNT_] = {
#define KG_XX(e, name, seeded, desc) [KG_CLASS_##e] = name,
	KG_INPUT_CLASS_MAP(KG_XX)
#undef KG_XX
};

static const char *const class_descs[KG_CLASS_COUNT_] = {
#define KG_XX(e, name, seeded, desc) [KG_CLASS_##e] = desc,
	KG_INPUT_CLASS_MAP(KG_XX)
#undef KG_XX
};

static const unsigned char class_seeded[KG_CLASS_COUNT_] = {
#define KG_XX(e, name, seeded, desc) [KG_CLASS_##e] = seeded,
	KG_INPUT_CLASS_MAP(KG_XX)
#undef KG_XX
};

static const char *const tool_names[KG_SAN_COUNT_] = {
#define KG_XX(e, name, code, desc) [KG_SAN_##e] = name,
	KG_SANITIZER_TOOL_MAP(KG_XX)
#undef KG_XX
};

static const enum kg_reason_code tool_reasons[KG_SAN_COUNT_] = {
#define KG_XX(e, name, code, desc) [KG_SAN_##e] = KG_R_##code,
	KG_SANITIZER_TOOL_MAP(KG_XX)
#undef KG_XX
};

static const char *const backend_names[KG_BACKEND_COUNT_] = {
#define KG_XX(e, name, ext, ref_key) [KG_BACKEND_##e] = name,
	KG_BACKEND_MAP(KG_XX)
#undef KG_XX
};

static const char *const backend_exts[KG_BACKEND_COUNT_] = {
#define KG_XX(e, name, ext, ref_key) [KG_BACKEND_##e] = ext,
	KG_BACKEND_MAP(KG_XX)
#undef KG_XX
};

static const char *const backend_ref_keys[KG_BACKEND_COUNT_] = {
#define KG_XX(e, name, ext, ref_key) [KG_BACKEND_##e] = ref_key,
	KG_BACKEND_MAP(KG_XX)
#undef KG_XX
};

/* The joined name lists, for messages: built from the tables, so a new entry is listed too. */
#define KG_XX(e, name, ...) ", " name
static const char backend_list[] = KG_BACKEND_MAP(KG_XX);
static const char class_list[] = KG_INPUT_CLASS_MAP(KG_XX);
static const char tool_list[] = KG_SANITIZER_TOOL_MAP(KG_XX);
#undef KG_XX

static int find(const char *const *names, int n, const char *name)
{
	for (int i = 0; name && i < n; i++)
		if (!strcmp(names[i], name))
			return i;
	return -1;
}

const char *kg_reason_name(enum kg_reason_code c)
{
	return (unsigned)c < KG_R_COUNT_ ? reasons[c].name : "?";
}

int kg_reason_parse(const char *name, enum kg_reason_code *out)
{
	for (int i = 0; name && i < KG_R_COUNT_; i++) {
		if (!strcmp(reasons[i].name, name)) {
			*out = (enum kg_reason_code)i;
			return 0;
		}
	}
	return -EINVAL;
}

int kg_reason_exit(enum kg_reason_code c)
{
	return (unsigned)c < KG_R_COUNT_ ? reasons[c].exit_class : KG_EXITCLASS_INTERNAL;
}

const char *kg_reason_check(enum kg_reason_code c)
{
	return (unsigned)c < KG_R_COUNT_ ? reasons[c].check : "correctness";
}

const char *kg_reason_short(enum kg_reason_code c)
{
	return (unsigned)c < KG_R_COUNT_ ? reasons[c].short_text : "kgate finding.";
}

const char *kg_reason_full(enum kg_reason_code c)
{
	return (unsigned)c < KG_R_COUNT_ ? reasons[c].full_text : "kgate finding.";
}

const char *kg_class_name(enum kg_input_class c)
{
	return (unsigned)c < KG_CLASS_COUNT_ ? class_names[c] : "?";
}

const char *kg_class_description(enum kg_input_class c)
{
	return (unsigned)c < KG_CLASS_COUNT_ ? class_descs[c] : "?";
}

int kg_class_is_seeded(enum kg_input_class c)
{
	return (unsigned)c < KG_CLASS_COUNT_ ? class_seeded[c] : 0;
}

int kg_class_parse(const char *name, enum kg_input_class *out)
{
	int i = find(class_names, KG_CLASS_COUNT_, name);
	if (i < 0)
		return -EINVAL;
	*out = (enum kg_input_class)i;
	return 0;
}

const char *kg_sanitizer_tool_name(enum kg_sanitizer_tool t)
{
	return (unsigned)t < KG_SAN_COUNT_ ? tool_names[t] : "?";
}

int kg_sanitizer_tool_parse(const char *name, enum kg_sanitizer_tool *out)
{
	int i = find(tool_names, KG_SAN_COUNT_, name);
	if (i < 0)
		return -EINVAL;
	*out = (enum kg_sanitizer_tool)i;
	return 0;
}

enum kg_reason_code kg_sanitizer_tool_reason(enum kg_sanitizer_tool t)
{
	return (unsigned)t < KG_SAN_COUNT_ ? tool_reasons[t] : KG_R_CHECK_MEMCHECK;
}

const char *kg_backend_name(enum kg_backend_id b)
{
	return (unsigned)b < KG_BACKEND_COUNT_ ? backend_names[b] : "?";
}

const char *kg_backend_ext(enum kg_backend_id b)
{
	return (unsigned)b < KG_BACKEND_COUNT_ ? backend_exts[b] : "";
}

const char *kg_backend_ref_key(enum kg_backend_id b)
{
	return (unsigned)b < KG_BACKEND_COUNT_ ? backend_ref_keys[b] : "";
}

int kg_backend_parse(const char *name, enum kg_backend_id *out)
{
	int i = find(backend_names, KG_BACKEND_COUNT_, name);
	if (i < 0)
		return -EINVAL;
	*out = (enum kg_backend_id)i;
	return 0;
}

int kg_backend_for_path(const char *path, enum kg_backend_id *out)
{
	const char *ext = path ? strrchr(path, '.') : NULL;
	if (!ext || strchr(ext, '/'))
		return -EINVAL;
	int i = find(backend_exts, KG_BACKEND_COUNT_, ext);
	if (i < 0)
		return -EINVAL;
	*out = (enum kg_backend_id)i;
	return 0;
}

const char *kg_backend_names(void)
{
	return backend_list + 2;
}

const char *kg_class_names(void)
{
	return class_list + 2;
}

const char *kg_sanitizer_tool_names(void)
{
	return tool_list + 2;
}

/* The seccomp filter a spawn spec describes, as text in KG_SB_ENV_FILTER: a deferred program loads
 * what its spawner asked for, not what it was told on its command line. The parser takes only what
 * the formatter writes: a value it does not fully understand is an error, never a weaker filter. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "sb_int.h"

static int name_ok(const char *s, size_t len)
{
	if (!len || len >= SB_FILTER_NAME_LEN)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

int sb_filter_desc_names(struct sb_filter_desc *d, const char *const *names, kg_error *e)
{
	d->n_syscalls = 0;
	for (size_t i = 0; names && names[i]; i++) {
		size_t len = strlen(names[i]);
		const char *why;
		if (d->n_syscalls == SB_FILTER_MAX_NAMES)
			return kg_err(e, -E2BIG, "sandbox: more than %d extra system calls", SB_FILTER_MAX_NAMES);
		if (!name_ok(names[i], len))
			return kg_err(e, -EINVAL, "sandbox: extra system call \"%.48s\" is not a system call name",
				      names[i]);
		if ((why = sb_filter_reserved(names[i])))
			return kg_err(e, -EPERM, "sandbox: extra system call %s refused: %s", names[i], why);
		memcpy(d->syscalls[d->n_syscalls++], names[i], len + 1);
	}
	return 0;
}

int sb_filter_desc_format(const struct sb_filter_desc *d, char *out, size_t n)
{
	char mem[24] = "none";
	if ((unsigned)d->profile > KG_SB_PROFILE_RUN || d->n_syscalls < 0 || d->n_syscalls > SB_FILTER_MAX_NAMES)
		return -EINVAL;
	if (d->mem_bytes)
		snprintf(mem, sizeof(mem), "%" PRIu64, d->mem_bytes);
	int len = snprintf(out, n, "%s;threads=%d;mem=%s;ro_opens=%d;watched=%d;syscalls=",
			   kg_sb_profile_name(d->profile), !!d->allow_threads, mem, d->readonly_opens == 2 ? 2 : !!d->readonly_opens,
			   !!d->watched);
	if (len < 0 || (size_t)len >= n)
		return -ENAMETOOLONG;
	for (int i = 0; i < d->n_syscalls; i++) {
		if (!name_ok(d->syscalls[i], strnlen(d->syscalls[i], SB_FILTER_NAME_LEN)))
			return -EINVAL;
		int k = snprintf(out + len, n - (size_t)len, "%s%s", i ? "," : "", d->syscalls[i]);
		if (k < 0 || (size_t)k >= n - (size_t)len)
			return -ENAMETOOLONG;
		len += k;
	}
	return len;
}

/* Consumes lit at *s. */
static int lit(const char **s, const char *want)
{
	size_t n = strlen(want);
	if (strncmp(*s, want, n))
		return -EINVAL;
	*s += n;
	return 0;
}

/* "key=0;" or "key=1;" */
static int flag(const char **s, const char *key, int *out)
{
	if (lit(s, key) || ((*s)[0] != '0' && (*s)[0] != '1') || (*s)[1] != ';')
		return -EINVAL;
	*out = (*s)[0] == '1';
	*s += 2;
	return 0;
}

/* ro_opens: 0, 1 (a write open ends the process) or 2 (a write open fails with EACCES) */
static int ro_flag(const char **s, int *out)
{
	if (lit(s, "ro_opens=") || (*s)[0] < '0' || (*s)[0] > '2' || (*s)[1] != ';')
		return -EINVAL;
	*out = (*s)[0] - '0';
	*s += 2;
	return 0;
}

static int mem_value(const char **s, uint64_t *out)
{
	if (!lit(s, "none;")) {
		*out = 0;
		return 0;
	}
	/* no sign, no leading zero, no zero (that is spelt "none"), no overflow */
	if (**s < '1' || **s > '9')
		return -EINVAL;
	uint64_t v = 0;
	for (; **s >= '0' && **s <= '9'; (*s)++) {
		unsigned digit = (unsigned)(**s - '0');
		if (v > (UINT64_MAX - digit) / 10)
			return -EINVAL;
		v = v * 10 + digit;
	}
	*out = v;
	return lit(s, ";");
}

int sb_filter_desc_parse(const char *s, struct sb_filter_desc *d)
{
	memset(d, 0, sizeof(*d));
	if (!s || strnlen(s, SB_FILTER_DESC_MAX) >= SB_FILTER_DESC_MAX)
		return -EINVAL;
	const char *semi = strchr(s, ';');
	char prof[16];
	if (!semi || (size_t)(semi - s) >= sizeof(prof))
		return -EINVAL;
	memcpy(prof, s, (size_t)(semi - s));
	prof[semi - s] = '\0';
	if (kg_sb_profile_parse(prof, &d->profile))
		return -EINVAL;
	s = semi + 1;
	if (flag(&s, "threads=", &d->allow_threads) || lit(&s, "mem=") || mem_value(&s, &d->mem_bytes) ||
	    ro_flag(&s, &d->readonly_opens) || flag(&s, "watched=", &d->watched) || lit(&s, "syscalls="))
		return -EINVAL;
	while (*s) {
		size_t len = strcspn(s, ",");
		if (d->n_syscalls == SB_FILTER_MAX_NAMES || !name_ok(s, len))
			return -EINVAL;
		memcpy(d->syscalls[d->n_syscalls], s, len);
		d->syscalls[d->n_syscalls][len] = '\0';
		if (sb_filter_reserved(d->syscalls[d->n_syscalls]))
			return -EINVAL;
		d->n_syscalls++;
		s += len;
		/* a separator must be followed by a name: no empty or trailing entries */
		if (*s == ',' && !*++s)
			return -EINVAL;
	}
	return 0;
}

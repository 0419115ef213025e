/* Stable names for profiles, layers and ends: they appear in reports, policies, logs and tests, so
 * they never change once shipped. What an end means for a verdict is the caller's to name. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sb_int.h"

static const char *const profile_names[] = {
	[KG_SB_PROFILE_COMPILE] = "compile",
	[KG_SB_PROFILE_RUN] = "run",
};

const char *kg_sb_profile_name(enum kg_sb_profile p)
{
	if ((unsigned)p >= KG_ARRAY_LEN(profile_names))
		return "?";
	return profile_names[p];
}

int kg_sb_profile_parse(const char *name, enum kg_sb_profile *out)
{
	for (unsigned i = 0; i < KG_ARRAY_LEN(profile_names); i++) {
		if (name && !strcmp(name, profile_names[i])) {
			*out = (enum kg_sb_profile)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Indexed by bit position, in minijail's order of bring-up. */
static const char *const layer_names[KG_SB_LAYER_COUNT_] = {
	"userns", "mountns", "pidns", "netns", "ipcns", "utsns",
	"no_new_privs", "caps", "rlimits", "cgroup", "landlock", "seccomp", "mseal",
};

const char *kg_sb_layer_name(unsigned bit)
{
	for (unsigned i = 0; i < KG_SB_LAYER_COUNT_; i++)
		if (bit == 1u << i)
			return layer_names[i];
	return "?";
}

char *kg_sb_layers_str(unsigned mask, char *out, size_t outsz)
{
	size_t len = 0;
	if (!outsz)
		return out;
	out[0] = '\0';
	for (unsigned i = 0; i < KG_SB_LAYER_COUNT_; i++) {
		if (!(mask & (1u << i)))
			continue;
		int n = snprintf(out + len, outsz - len, "%s%s", len ? "," : "", layer_names[i]);
		if (n < 0 || (size_t)n >= outsz - len)
			break;
		len += (size_t)n;
	}
	return out;
}

unsigned kg_sb_layer_parse(const char *name)
{
	for (unsigned i = 0; i < KG_SB_LAYER_COUNT_; i++)
		if (name && !strcmp(name, layer_names[i]))
			return 1u << i;
	return 0;
}

static const char *const end_names[] = {
	[KG_SB_END_RUNNING] = "running",
	[KG_SB_END_EXIT] = "exit",
	[KG_SB_END_SIGNAL] = "signal",
	[KG_SB_END_TIMEOUT] = "timeout",
	[KG_SB_END_SYSCALL] = "syscall",
	[KG_SB_END_MEMORY] = "memory",
	[KG_SB_END_OUTPUT_LIMIT] = "output_limit",
	[KG_SB_END_SETUP] = "setup",
	[KG_SB_END_KILLED] = "killed",
	[KG_SB_END_TAMPER] = "tamper",
};

const char *kg_sb_end_name(enum kg_sb_end end)
{
	if ((unsigned)end >= KG_ARRAY_LEN(end_names))
		return "?";
	return end_names[end];
}

const char *sb_signame(int sig, char *buf, size_t n)
{
	const char *abbrev = sigabbrev_np(sig);
	if (abbrev)
		snprintf(buf, n, "SIG%s", abbrev);
	else
		snprintf(buf, n, "signal %d", sig);
	return buf;
}

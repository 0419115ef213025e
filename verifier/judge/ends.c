/* The sandbox's ends (sandbox.h) named as reasons and sentences, in one place for the compile,
 * the checked runs and the compute-sanitizer runs. */
#include "verifier/judge/ends.h"

#include <stdio.h>
#include <string.h>

enum kg_reason_code kg_end_reason(enum kg_sb_end end)
{
	switch (end) {
	case KG_SB_END_TIMEOUT:
		return KG_R_SANDBOX_TIMEOUT;
	case KG_SB_END_SYSCALL:
		return KG_R_SANDBOX_SYSCALL;
	case KG_SB_END_MEMORY:
		return KG_R_SANDBOX_MEMORY;
	case KG_SB_END_OUTPUT_LIMIT:
		return KG_R_SANDBOX_OUTPUT_LIMIT;
	case KG_SB_END_SETUP:
		return KG_R_SANDBOX_SETUP;
	case KG_SB_END_TAMPER:
		return KG_R_SANDBOX_TAMPER;
	case KG_SB_END_SIGNAL:
	case KG_SB_END_KILLED:
	case KG_SB_END_EXIT:
	case KG_SB_END_RUNNING:
		break;
	}
	return KG_R_SANDBOX_CRASH;
}

int kg_end_sealed_call(const struct kg_sb_outcome *o, int sealed)
{
	return sealed && o->end == KG_SB_END_SYSCALL && !o->syscall[0] && o->denials_named;
}

void kg_end_describe(const struct kg_sb_outcome *o, char *out, size_t outsz)
{
	const char *sig = o->end == KG_SB_END_SIGNAL ? sigabbrev_np(o->signo) : NULL;
	switch (o->end) {
	case KG_SB_END_EXIT:
		snprintf(out, outsz, "the process exited with status %d", o->exit_code);
		break;
	case KG_SB_END_SIGNAL:
		snprintf(out, outsz, "the process was killed by SIG%s%s%s", sig ? sig : "?", o->detail[0] ? ": " : "",
			 o->detail);
		break;
	case KG_SB_END_SYSCALL:
		snprintf(out, outsz, "denied system call %s%s%s", o->syscall[0] ? o->syscall : "(unknown)",
			 o->detail[0] ? ": " : "", o->detail);
		break;
	default:
		snprintf(out, outsz, "%s", o->detail[0] ? o->detail : "the process ended");
	}
}

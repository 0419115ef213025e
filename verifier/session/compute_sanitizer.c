/* compute-sanitizer as kgate drives it: the command line of one tool's run and the reading of its
 * report. The verifier decides by the tool's exit status; the report only explains. */
#include "verifier/session/compute_sanitizer.h"

#include <stdio.h>
#include <string.h>

int kg_sanitizer_argv(enum kg_sanitizer_tool tool, const char *bin, const char *prefix, const char **argv)
{
	int n = 0;
	argv[n++] = bin;
	argv[n++] = "--tool";
	argv[n++] = kg_sanitizer_tool_name(tool);
	argv[n++] = "--error-exitcode";
	argv[n++] = KG_SANITIZER_ERROR_EXIT_STR;
	argv[n++] = "--print-limit";
	argv[n++] = "10";
	argv[n++] = "--prefix";
	argv[n++] = prefix;
	/* the runner's own exit status is the protocol's business, not the tool's */
	argv[n++] = "--check-exit-code";
	argv[n++] = "no";
	argv[n++] = "--launch-timeout";
	argv[n++] = "60";
	argv[n++] = "--show-backtrace";
	argv[n++] = "device";
	if (tool == KG_SAN_MEMCHECK) {
		/* Padding after every allocation, so that a read just past one tensor cannot land in the
		 * next tensor's allocation, where the tool would see nothing wrong. Failed API calls are
		 * the runner's to report, not memory errors. */
		argv[n++] = "--padding";
		argv[n++] = "65536";
		argv[n++] = "--report-api-errors";
		argv[n++] = "no";
	}
	argv[n] = NULL;
	return n;
}

/* The first report in the tool's output (the lines behind our prefix), folded into one line: what,
 * where, which thread, which address, and the tool's count. A report is an unindented line and
 * the indented ones under it; frames of the backtrace are left out. */
void kg_sanitizer_first_error(const char *out, const char *prefix, char *msg, size_t msgsz)
{
	size_t len = 0, plen = strlen(prefix);
	int lines = 0, done = 0;
	char summary[96] = "";
	msg[0] = '\0';
	for (const char *p = out; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		if (n > plen && !strncmp(p, prefix, plen)) {
			const char *t = p + plen;
			size_t tn = n - plen, indent = 0;
			while (tn && (*t == ' ' || *t == '\t'))
				t++, tn--, indent++;
			while (tn && t[tn - 1] == '\r')
				tn--;
			int is_summary = !strncmp(t, "ERROR SUMMARY", 13) || !strncmp(t, "RACECHECK SUMMARY", 17);
			if (is_summary)
				snprintf(summary, sizeof(summary), "%.*s", (int)tn, t);
			int skip = !tn || is_summary || !strncmp(t, "COMPUTE-SANITIZER", 17) ||
				   !strncmp(t, "Saved host backtrace", 20) || !strncmp(t, "Host Frame", 10) ||
				   !strncmp(t, "Device Frame", 12);
			if (!skip && !done) {
				if (indent <= 1 && lines)
					done = 1; /* the next report */
				else if (indent <= 1 || lines) {
					if (len < msgsz)
						len += (size_t)snprintf(msg + len, msgsz - len, "%s%.*s", lines ? "; " : "",
									(int)tn, t);
					if (++lines >= 5)
						done = 1;
				}
			}
		}
		p = end ? end + 1 : NULL;
	}
	if (!lines)
		snprintf(msg, msgsz, "(the report was not captured)");
	len = strlen(msg);
	if (summary[0] && len + 3 < msgsz)
		snprintf(msg + len, msgsz - len, " (%s)", summary);
}


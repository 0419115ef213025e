/* The --report specs (report.h): FORMAT:PATH checked before any work, and a verdict written in
 * each format by its renderer (json.c, sarif.c, junit.c, summary.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kg_common.h"
#include "verifier/report/report.h"

static const char *const report_formats[] = {"json", "sarif", "junit", "text", NULL};

int kg_report_check(const char *spec, kg_error *e)
{
	const char *colon = strchr(spec, ':');
	if (!colon || colon == spec || !colon[1])
		return kg_err(e, -EINVAL, "--report expects FORMAT:PATH (json, sarif, junit, text), got '%s'", spec);
	int known = 0;
	for (const char *const *f = report_formats; *f; f++)
		known |= strlen(*f) == (size_t)(colon - spec) && !strncmp(*f, spec, (size_t)(colon - spec));
	if (!known)
		return kg_err(e, -EINVAL, "--report %s: unknown format '%.*s' (json, sarif, junit, text)", spec,
			      (int)(colon - spec), spec);
	const char *path = colon + 1;
	if (!strcmp(path, "-"))
		return 0;
	char dir[4096];
	struct stat st;
	kg_dirname(path, dir, sizeof(dir));
	if (stat(dir, &st) || !S_ISDIR(st.st_mode))
		return kg_err(e, -ENOENT, "--report %s: the directory %s does not exist", spec, dir);
	if (access(dir, W_OK | X_OK))
		return kg_err(e, -EACCES, "--report %s: cannot write in %s: %s", spec, dir, strerror(errno));
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return kg_err(e, -EISDIR, "--report %s: %s is a directory", spec, path);
	if (!stat(path, &st) && access(path, W_OK))
		return kg_err(e, -EACCES, "--report %s: cannot write %s: %s", spec, path, strerror(errno));
	return 0;
}

int kg_report_write(const struct kg_verdict *v, const char *spec, kg_error *e)
{
	const char *colon = strchr(spec, ':');
	char fmt[16];
	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(fmt) || !colon[1])
		return kg_err(e, -EINVAL, "--report expects FORMAT:PATH (json, sarif, junit, text), got '%s'", spec);
	snprintf(fmt, sizeof(fmt), "%.*s", (int)(colon - spec), spec);
	const char *path = colon + 1;
	if (!strcmp(fmt, "json"))
		return kg_report_json(v, path, e);
	if (!strcmp(fmt, "sarif"))
		return kg_report_sarif(v, path, e);
	if (!strcmp(fmt, "junit"))
		return kg_report_junit(v, path, e);
	if (!strcmp(fmt, "text"))
		return kg_report_text(v, path, e);
	return kg_err(e, -EINVAL, "unknown report format '%s' (json, sarif, junit, text)", fmt);
}

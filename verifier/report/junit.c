/* The JUnit XML report (CI test views): one test case per check, a failure per reason with the
 * check it belongs to, every string escaped for XML (invisible and control characters included). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kg_text.h"
#include "verifier/report/report_int.h"
#include "verifier/judge/verdict.h"

/* s as XML character data or an attribute value: made safe first (kg_text: no control bytes, no
 * invalid UTF-8, both of which XML 1.0 forbids even as references), then the five entities. */
static void xml_escape(FILE *f, const char *s, int mode)
{
	char *t = kg_text_safe_dup(s, mode, NULL);
	for (const char *p = t ? t : "(out of memory)"; *p; p++) {
		switch (*p) {
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '&':
			fputs("&amp;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			fputc(*p, f);
		}
	}
	free(t);
}

static void xml_attr(FILE *f, const char *name, const char *value)
{
	fprintf(f, " %s=\"", name);
	xml_escape(f, value, KG_TEXT_ONELINE);
	fputc('"', f);
}

static int reason_in_checks(const struct kg_verdict *v, const struct kg_reason *r)
{
	for (int j = 0; j < v->n_checks; j++)
		if (!strcmp(v->checks[j].name, kg_reason_check(r->code)))
			return 1;
	return 0;
}

/* The reasons of one check (or, with check NULL, those of no check) as a failure's text; type is
 * the first one's code. */
static void junit_failure(FILE *f, const struct kg_verdict *v, const char *check, const char *message)
{
	const char *type = "kgate.rejected";
	for (int r = 0; r < v->n_reasons; r++)
		if (check ? !strcmp(kg_reason_check(v->reasons[r].code), check) : !reason_in_checks(v, &v->reasons[r])) {
			type = kg_reason_name(v->reasons[r].code);
			break;
		}
	fprintf(f, "      <failure");
	xml_attr(f, "message", message);
	xml_attr(f, "type", type);
	fputc('>', f);
	for (int r = 0; r < v->n_reasons; r++) {
		const struct kg_reason *x = &v->reasons[r];
		if (check ? strcmp(kg_reason_check(x->code), check) : reason_in_checks(v, x))
			continue;
		xml_escape(f, kg_reason_name(x->code), KG_TEXT_ONELINE);
		fputs(": ", f);
		xml_escape(f, x->message, KG_TEXT_ONELINE);
		if (x->input_class[0]) {
			fputs(" [class ", f);
			xml_escape(f, x->input_class, KG_TEXT_ONELINE);
			fputs(", shape ", f);
			xml_escape(f, x->shape, KG_TEXT_ONELINE);
			fputc(']', f);
		}
		fputc('\n', f);
	}
	fprintf(f, "</failure>\n");
}

/* JUnit XML valid against the common JUnit.xsd (Ant's, as CI test views read it): the suite's
 * package, id, timestamp (UTC, no zone), hostname and properties; one testcase per check with at
 * most one of skipped, failure (type = reason code) or error; the compile log and the passing
 * checks' details in the suite's system-out. */
int kg_report_junit(const struct kg_verdict *v, const char *path, kg_error *e)
{
	FILE *f = kg_report_open(path, e);
	if (!f)
		return e ? e->code : -EIO;
	int failures = 0, skipped = 0, orphans = 0;
	for (int i = 0; i < v->n_checks; i++) {
		failures += v->checks[i].status == KG_CHECK_FAIL;
		skipped += v->checks[i].status == KG_CHECK_SKIP;
	}
	for (int i = 0; i < v->n_reasons; i++)
		orphans += !reason_in_checks(v, &v->reasons[i]);
	int internal = v->internal_error[0] != '\0';
	char stamp[32], host[256], suite[96], num[64];
	time_t t0 = v->started ? v->started : time(NULL);
	struct tm tm;
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", gmtime_r(&t0, &tm));
	if (gethostname(host, sizeof(host)) || !host[0])
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	snprintf(suite, sizeof(suite), "kgate.%s", v->task[0] ? v->task : "unknown");
	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite");
	xml_attr(f, "name", suite);
	xml_attr(f, "package", "kgate");
	fprintf(f, " id=\"0\"");
	xml_attr(f, "timestamp", stamp);
	xml_attr(f, "hostname", host);
	fprintf(f, " tests=\"%d\" failures=\"%d\" errors=\"%d\" skipped=\"%d\" time=\"%.3f\">\n",
		v->n_checks + (orphans > 0) + internal, failures + (orphans > 0), internal, skipped, v->t_total_s);
	fprintf(f, "    <properties>\n");
	snprintf(num, sizeof(num), "%d", v->exit_code);
	const char *props[][2] = {
		{"candidate", v->candidate}, {"verdict", kg_report_verdict_word(v)}, {"exit_code", num},
		{"backend", v->backend},     {"device", v->device},		    {"policy", v->policy},
		{"shape_set", v->shape_set}, {"dims", v->dims},			    {"seed", v->seed_key},
	};
	for (size_t i = 0; i < KG_ARRAY_LEN(props); i++) {
		fprintf(f, "      <property");
		xml_attr(f, "name", props[i][0]);
		xml_attr(f, "value", props[i][1]);
		fprintf(f, "/>\n");
	}
	fprintf(f, "    </properties>\n");
	for (int i = 0; i < v->n_checks; i++) {
		const struct kg_check *c = &v->checks[i];
		fprintf(f, "    <testcase");
		xml_attr(f, "classname", suite);
		xml_attr(f, "name", c->name);
		fprintf(f, " time=\"%.3f\"", c->seconds);
		if (c->status == KG_CHECK_PASS) {
			fprintf(f, "/>\n");
			continue;
		}
		fprintf(f, ">\n");
		if (c->status == KG_CHECK_SKIP) {
			fprintf(f, "      <skipped");
			xml_attr(f, "message", c->detail);
			fprintf(f, "/>\n");
		} else {
			junit_failure(f, v, c->name, c->detail);
		}
		fprintf(f, "    </testcase>\n");
	}
	if (orphans) { /* reasons of no check that ran (the candidate died while loading, say) */
		fprintf(f, "    <testcase");
		xml_attr(f, "classname", suite);
		fprintf(f, " name=\"verdict\" time=\"0\">\n");
		junit_failure(f, v, NULL, "rejected");
		fprintf(f, "    </testcase>\n");
	}
	if (internal) {
		fprintf(f, "    <testcase");
		xml_attr(f, "classname", suite);
		fprintf(f, " name=\"not-verified\" time=\"0\">\n      <error");
		xml_attr(f, "message", v->internal_error);
		xml_attr(f, "type", "kgate.not_verified");
		fprintf(f, ">");
		xml_escape(f, v->internal_error, KG_TEXT_MULTILINE);
		fprintf(f, "</error>\n    </testcase>\n");
	}
	fprintf(f, "    <system-out>");
	for (int i = 0; i < v->n_checks; i++) {
		xml_escape(f, v->checks[i].name, KG_TEXT_ONELINE);
		fputs(": ", f);
		xml_escape(f, v->checks[i].detail, KG_TEXT_ONELINE);
		fputc('\n', f);
	}
	if (v->compile_log[0]) {
		fputs("compile log:\n", f);
		xml_escape(f, v->compile_log, KG_TEXT_MULTILINE);
	}
	fprintf(f, "</system-out>\n    <system-err/>\n  </testsuite>\n</testsuites>\n");
	return kg_report_close(f, path, e);
}

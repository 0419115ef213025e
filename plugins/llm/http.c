/* One JSON POST to an LLM endpoint over libcurl, retried on transient failures (connection
 * errors, timeouts, 408/409/429/5xx, malformed answers) with Retry-After honoured and exponential
 * backoff otherwise. Headers may carry API keys: they go to curl and nowhere else. */
#include "plugins/llm/llm.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define MAX_BODY (32u << 20)

struct answer {
	kg_buf body;
	int too_big;
	char retry_after[128];
	char retry_after_ms[32];
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct answer *a = ud;
	size_t len = sz * n;
	if (a->body.len + len > MAX_BODY) {
		a->too_big = 1;
		return 0; /* aborts the transfer */
	}
	return kg_buf_append(&a->body, p, len) ? 0 : len;
}

/* Copies the value of "Name: value\r\n" into out when the header is name. */
static void header_value(const char *line, size_t len, const char *name, char *out, size_t outsz)
{
	size_t nl = strlen(name);
	if (len <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return;
	const char *v = line + nl + 1;
	size_t vl = len - nl - 1;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
		vl--;
	snprintf(out, outsz, "%.*s", (int)vl, v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
	struct answer *a = ud;
	size_t len = sz * n;
	header_value(p, len, "retry-after", a->retry_after, sizeof(a->retry_after));
	header_value(p, len, "retry-after-ms", a->retry_after_ms, sizeof(a->retry_after_ms));
	return len;
}

void kg_url_redact(const char *url, char *out, size_t outsz)
{
	const char *scheme = strstr(url, "://");
	const char *host = scheme ? scheme + 3 : url;
	const char *slash = strchr(host, '/');
	const char *at = strchr(host, '@');
	if (at && (!slash || at < slash))
		snprintf(out, outsz, "%.*s***@%s", (int)(host - url), url, at + 1);
	else
		snprintf(out, outsz, "%s", url);
}

/* The server's own explanation, for the error message: error.message in both APIs' error
 * bodies, else the start of the body with control characters blanked. */
static void body_excerpt(const kg_buf *b, char *out, size_t outsz)
{
	out[0] = '\0';
	if (!b->len)
		return;
	json_t *j = json_loadb(b->data, b->len, 0, NULL);
	json_t *err = j ? json_object_get(j, "error") : NULL;
	const char *m = json_is_string(err)				       ? json_string_value(err)
			: json_is_string(json_object_get(err, "message")) ? json_string_value(json_object_get(err, "message"))
									      : NULL;
	if (m)
		snprintf(out, outsz, ": %s", m);
	else {
		size_t n = b->len < 160 ? b->len : 160;
		snprintf(out, outsz, ": %.*s%s", (int)n, b->data, b->len > n ? "..." : "");
		for (char *c = out; *c; c++)
			if ((unsigned char)*c < 0x20)
				*c = ' ';
	}
	json_decref(j);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint32_t random32(void)
{
	uint32_t r;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)kg_now_ns() * 2654435761u;
	return r;
}

static int transient_curl(CURLcode c)
{
	return c == CURLE_COULDNT_CONNECT || c == CURLE_OPERATION_TIMEDOUT || c == CURLE_GOT_NOTHING ||
	       c == CURLE_RECV_ERROR || c == CURLE_SEND_ERROR || c == CURLE_PARTIAL_FILE ||
	       c == CURLE_COULDNT_RESOLVE_HOST || c == CURLE_SSL_CONNECT_ERROR || c == CURLE_HTTP2 ||
	       c == CURLE_HTTP2_STREAM;
}

int kg_http_post(const struct kg_http_opts *o, const char *url, const char *const *headers, const char *body,
		 kg_llm_parse_fn parse, kg_buf *text, kg_buf *log, kg_error *e)
{
	char shown[512], errbuf[CURL_ERROR_SIZE], why[600] = "";
	kg_url_redact(url, shown, sizeof(shown));
	struct answer a = {0};
	struct curl_slist *hl = NULL, *tmp;
	int rc = 0, unreachable = 0;
	CURL *c = curl_easy_init();
	if (!c)
		return kg_err(e, -ENOMEM, "curl_easy_init failed");
	/* "Expect:" off: a 100-continue round trip only adds latency for these small bodies. */
	const char *fixed[] = {"Content-Type: application/json", "Accept: application/json", "Expect:"};
	for (size_t i = 0; i < KG_ARRAY_LEN(fixed); i++)
		if ((tmp = curl_slist_append(hl, fixed[i])))
			hl = tmp;
	for (int i = 0; headers && headers[i]; i++)
		if ((tmp = curl_slist_append(hl, headers[i])))
			hl = tmp;
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, o->timeout_ms);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");
	curl_easy_setopt(c, CURLOPT_USERAGENT, "kgate-agent/1");
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);

	for (int attempt = 0;; attempt++) {
		kg_buf_free(&a.body);
		a.too_big = 0;
		a.retry_after[0] = a.retry_after_ms[0] = '\0';
		errbuf[0] = why[0] = '\0';
		int retry = 0;
		long status = 0;
		unreachable = 0;
		CURLcode cc = curl_easy_perform(c);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (cc != CURLE_OK) {
			retry = transient_curl(cc) && !a.too_big;
			unreachable = cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST;
			snprintf(why, sizeof(why), "%s", a.too_big ? "answer larger than 32 MiB" : errbuf[0] ? errbuf : curl_easy_strerror(cc));
			rc = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -EIO;
		} else if (status >= 200 && status < 300) {
			json_error_t je;
			json_t *root = json_loadb(a.body.data ? a.body.data : "", a.body.len, 0, &je);
			char pwhy[256] = "";
			if (!root)
				snprintf(why, sizeof(why), "HTTP %ld with malformed JSON (%s at line %d)", status, je.text, je.line);
			else if (parse(root, text, pwhy, sizeof(pwhy)) < 0)
				snprintf(why, sizeof(why), "HTTP %ld with an unexpected answer: %s", status, pwhy);
			json_decref(root);
			if (!why[0]) {
				kg_buf_printf(log, "POST %s: HTTP %ld after %d attempt%s\n", shown, status, attempt + 1,
					      attempt ? "s" : "");
				rc = 0;
				break;
			}
			retry = 1;
			rc = -EBADMSG;
		} else {
			char ex[300];
			body_excerpt(&a.body, ex, sizeof(ex));
			snprintf(why, sizeof(why), "HTTP %ld%s", status, ex);
			retry = kg_http_retryable(status);
			rc = status == 401 || status == 403 ? -EACCES : -EIO;
		}
		if (!retry || attempt >= o->max_retries) {
			kg_buf_printf(log, "POST %s: %s; giving up after %d attempt%s\n", shown, why, attempt + 1,
				      attempt ? "s" : "");
			break;
		}
		long wait = a.retry_after_ms[0] ? strtol(a.retry_after_ms, NULL, 10) : -1;
		const char *src = "Retry-After-Ms";
		if (wait < 0) {
			wait = kg_retry_after_ms(a.retry_after, time(NULL));
			src = "Retry-After";
		}
		if (wait > o->retry_after_max_ms) {
			snprintf(why + strlen(why), sizeof(why) - strlen(why), "; the server asks to wait %ld s, more than the %ld s allowed",
				 wait / 1000, o->retry_after_max_ms / 1000);
			kg_buf_printf(log, "POST %s: %s\n", shown, why);
			break;
		}
		if (wait < 0) {
			wait = kg_backoff_ms(attempt, o->backoff_ms, o->backoff_max_ms, random32());
			src = "backoff";
		}
		kg_buf_printf(log, "POST %s: %s; retry %d/%d in %.1f s (%s)\n", shown, why, attempt + 1, o->max_retries,
			      (double)wait / 1000.0, src);
		sleep_ms(wait);
	}
	if (rc) {
		if (unreachable)
			kg_err(e, rc, "cannot reach %s: %s (is the server running, and is base_url right?)", shown, why);
		else
			kg_err(e, rc, "%s: %s", shown, why);
	}
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	kg_buf_free(&a.body);
	return rc;
}

char *kg_llm_header(const char *fmt, const char *v)
{
	size_t n = strlen(fmt) + strlen(v) + 1;
	char *h = malloc(n);
	if (h)
		snprintf(h, n, fmt, v);
	return h;
}

/* OUTDIR/history.jsonl: one JSON line per verified candidate plus one per finished round, appended
 * and fsync'ed as results arrive, so an interrupted search loses at most the verification that
 * was running. Loading tolerates a last line cut short by a crash. */
#include "agents/search.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_HISTORY (256u << 20)

static int add_rec(struct kg_history *h, json_t *j)
{
	const char *id = json_string_value(json_object_get(j, "id"));
	const char *verdict = json_string_value(json_object_get(j, "verdict"));
	if (!id || strlen(id) != 64 || !verdict)
		return -EINVAL;
	if (h->n == h->cap) {
		int nc = h->cap ? h->cap * 2 : 64;
		struct kg_rec *r = realloc(h->recs, (size_t)nc * sizeof(*r));
		if (!r)
			return -ENOMEM;
		h->recs = r;
		h->cap = nc;
	}
	struct kg_rec *r = &h->recs[h->n];
	memset(r, 0, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->round = (int)json_integer_value(json_object_get(j, "round"));
	r->idea = (int)json_integer_value(json_object_get(j, "idea"));
	r->verdict = !strcmp(verdict, "accepted") ? KG_REC_ACCEPTED : !strcmp(verdict, "rejected") ? KG_REC_REJECTED : KG_REC_ERROR;
	/* The report's timing object, as the line carries it (docs/report.md). A line written before
	 * the history kept the report's structure has no timing.candidate: it counts as untimed. */
	json_t *t = json_object_get(j, "timing");
	json_t *median = json_object_get(json_object_get(t, "candidate"), "median_ms");
	json_t *speedup = json_object_get(t, "speedup");
	if (json_is_number(median) && json_is_number(speedup)) {
		r->timed = 1;
		r->speedup = json_number_value(speedup);
		r->median_ms = json_number_value(median);
	}
	const char *lang = json_string_value(json_object_get(j, "language"));
	r->backend = KG_BACKEND_CPU;
	for (int i = 0; lang && i < KG_BACKEND_COUNT_; i++)
		if (!strcmp(lang, kg_backend_ref_key((enum kg_backend_id)i)))
			r->backend = (enum kg_backend_id)i;
	r->j = json_incref(j);
	h->n++;
	return 0;
}

static void note_line(struct kg_history *h, json_t *j)
{
	const char *ev = json_string_value(json_object_get(j, "event"));
	if (!ev)
		return;
	if (!strcmp(ev, "candidate")) {
		/* A verdict recorded twice keeps the first, except that an infrastructure error (which
		 * says nothing about the candidate) gives way to a real verdict from a later run. */
		const char *id = json_string_value(json_object_get(j, "id"));
		const struct kg_rec *old = id ? kg_history_find(h, id) : NULL;
		if (old && old->verdict == KG_REC_ERROR) {
			struct kg_rec *o = &h->recs[old - h->recs];
			json_decref(o->j);
			memmove(o, o + 1, (size_t)(h->n - (o - h->recs) - 1) * sizeof(*o));
			h->n--;
			old = NULL;
		}
		if (id && !old)
			add_rec(h, j);
	} else if (!strcmp(ev, "finalists")) {
		json_decref(h->finalists);
		h->finalists = json_incref(j);
	} else if (!strcmp(ev, "duplicate")) {
		h->duplicates++;
	} else if (!strcmp(ev, "round")) {
		json_int_t r = json_integer_value(json_object_get(j, "round"));
		if (r >= 1 && r <= KG_SEARCH_MAX_ROUNDS)
			h->done[r] = 1;
	}
}

int kg_history_open(struct kg_history *h, const char *dir, kg_error *e)
{
	memset(h, 0, sizeof(*h));
	h->fd = -1;
	snprintf(h->dir, sizeof(h->dir), "%s", dir);
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/history.jsonl", dir);
	char *text = NULL;
	size_t len = 0;
	int rc = 0;
	if (!access(path, F_OK) && (rc = kg_read_file(path, MAX_HISTORY, &text, &len, e)))
		return rc;
	/* Decided before the parse below, which cuts the text into lines in place. */
	int unterminated = len && text[len - 1] != '\n';
	for (char *line = text, *next; line && *line; line = next) {
		char *nl = strchr(line, '\n');
		next = nl ? nl + 1 : NULL;
		if (!nl)
			break; /* no newline: the write was cut short; the line is not trusted */
		*nl = '\0';
		if (!*line)
			continue;
		json_t *j = json_loads(line, 0, NULL);
		if (!j) {
			h->skipped++;
			continue;
		}
		note_line(h, j);
		json_decref(j);
	}
	free(text);
	h->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (h->fd < 0)
		return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	/* End the torn line so the next one starts on its own. */
	if (unterminated) {
		h->skipped++;
		if (write(h->fd, "\n", 1) != 1)
			return kg_err(e, -errno, "%s: %s", path, strerror(errno));
	}
	return 0;
}

int kg_history_append(struct kg_history *h, json_t *line, kg_error *e)
{
	char *s = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!s)
		return kg_err(e, -ENOMEM, "history: out of memory");
	size_t n = strlen(s);
	/* One write of line + newline: O_APPEND keeps it whole with respect to other appends. */
	char *buf = malloc(n + 1);
	int rc = 0;
	if (!buf) {
		free(s);
		return kg_err(e, -ENOMEM, "history: out of memory");
	}
	memcpy(buf, s, n);
	buf[n] = '\n';
	free(s);
	for (size_t off = 0; off < n + 1;) {
		ssize_t w = write(h->fd, buf + off, n + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = kg_err(e, -errno, "history: write: %s", strerror(errno));
			goto out;
		}
		off += (size_t)w;
	}
	if (fsync(h->fd)) {
		rc = kg_err(e, -errno, "history: fsync: %s", strerror(errno));
		goto out;
	}
	note_line(h, line);
out:
	free(buf);
	return rc;
}

const struct kg_rec *kg_history_find(const struct kg_history *h, const char *id)
{
	for (int i = 0; i < h->n; i++)
		if (!strcmp(h->recs[i].id, id))
			return &h->recs[i];
	return NULL;
}

void kg_history_close(struct kg_history *h)
{
	for (int i = 0; i < h->n; i++)
		json_decref(h->recs[i].j);
	free(h->recs);
	json_decref(h->finalists);
	h->finalists = NULL;
	if (h->fd >= 0)
		close(h->fd);
	h->recs = NULL;
	h->n = h->cap = 0;
	h->fd = -1;
}

/* Better first: timed before untimed, higher speedup, then the earlier record (stable). */
static int better(const struct kg_rec *a, const struct kg_rec *b)
{
	if (a->timed != b->timed)
		return a->timed;
	return a->timed && a->speedup > b->speedup;
}

int kg_history_best(const struct kg_history *h, const struct kg_rec **out, int k)
{
	int n = 0;
	for (int i = 0; i < h->n; i++) {
		const struct kg_rec *r = &h->recs[i];
		if (r->verdict != KG_REC_ACCEPTED)
			continue;
		/* Insertion into the sorted top-k. */
		int pos = n;
		while (pos > 0 && better(r, out[pos - 1]))
			pos--;
		if (pos >= k)
			continue;
		int last = n < k ? n : k - 1;
		for (int m = last; m > pos; m--)
			out[m] = out[m - 1];
		out[pos] = r;
		if (n < k)
			n++;
	}
	return n;
}

int kg_write_atomic(const char *path, const void *data, size_t len, kg_error *e)
{
	char tmp[PATH_MAX + 32];
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return kg_err(e, -errno, "%s: %s", tmp, strerror(errno));
	const char *p = data;
	int rc = 0;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			rc = kg_err(e, -errno, "%s: write: %s", tmp, strerror(errno));
			break;
		}
		p += w;
		len -= (size_t)w;
	}
	if (!rc && fsync(fd))
		rc = kg_err(e, -errno, "%s: fsync: %s", tmp, strerror(errno));
	if (close(fd) && !rc)
		rc = kg_err(e, -errno, "%s: close: %s", tmp, strerror(errno));
	if (!rc && rename(tmp, path))
		rc = kg_err(e, -errno, "rename %s: %s", path, strerror(errno));
	if (rc)
		unlink(tmp);
	return rc;
}

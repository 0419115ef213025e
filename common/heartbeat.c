/* The heartbeat thread (kg_heartbeat.h). The phase text is copied under a mutex; the thread sleeps
 * on a condition variable so that stop returns at once, never after a full interval. */
#include "kg_heartbeat.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kg_common.h"

static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t th;
	int running, stop;
	double interval_s;
	char label[64];
	char phase[200];
	char kind[64]; /* the phase's text before its counter: a new kind restarts the estimate */
	uint64_t t_start, t_phase;
	long done, total;
} hb = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The first "i/n" of the phase text: the callers already print their progress that way. */
static void parse_counter(const char *s, char *kind, size_t kindsz, long *done, long *total)
{
	*done = *total = -1;
	for (const char *p = s; *p; p++) {
		char *end = NULL;
		if (*p < '0' || *p > '9' || (p > s && p[-1] >= '0' && p[-1] <= '9'))
			continue;
		long a = strtol(p, &end, 10);
		if (*end != '/' || end[1] < '0' || end[1] > '9')
			continue;
		*done = a;
		*total = strtol(end + 1, NULL, 10);
		snprintf(kind, kindsz, "%.*s", (int)(p - s), s);
		return;
	}
	snprintf(kind, kindsz, "%s", s);
}

static void print_line(void)
{
	uint64_t now = kg_now_ns();
	double all = (double)(now - hb.t_start) / 1e9, in_phase = (double)(now - hb.t_phase) / 1e9;
	char est[80] = "";
	if (hb.done > 0 && hb.total >= hb.done && in_phase > 0)
		snprintf(est, sizeof(est), ", about %.0f s left in this phase",
			 in_phase * (double)(hb.total - hb.done) / (double)hb.done);
	fprintf(stderr, "[kgate] %s: %s, %.0f s elapsed%s\n", hb.label, hb.phase[0] ? hb.phase : "starting", all, est);
	fflush(stderr);
}

static void *beat(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&hb.mu);
	print_line(); /* at once: a log shows that the job started, whatever its length */
	while (!hb.stop) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		double when = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + hb.interval_s;
		ts.tv_sec = (time_t)when;
		ts.tv_nsec = (long)((when - (double)ts.tv_sec) * 1e9);
		int rc = 0;
		while (!hb.stop && rc != ETIMEDOUT)
			rc = pthread_cond_timedwait(&hb.cv, &hb.mu, &ts);
		if (!hb.stop)
			print_line();
	}
	pthread_mutex_unlock(&hb.mu);
	return NULL;
}

int kg_heartbeat_start(const char *label, double interval_s)
{
	pthread_mutex_lock(&hb.mu);
	if (hb.running) {
		pthread_mutex_unlock(&hb.mu);
		return -EBUSY;
	}
	snprintf(hb.label, sizeof(hb.label), "%s", label);
	hb.phase[0] = hb.kind[0] = '\0';
	hb.done = hb.total = -1;
	hb.interval_s = interval_s > 0.1 ? interval_s : 0.1;
	hb.t_start = hb.t_phase = kg_now_ns();
	hb.stop = 0;
	int rc = -pthread_create(&hb.th, NULL, beat, NULL);
	hb.running = !rc;
	pthread_mutex_unlock(&hb.mu);
	return rc;
}

void kg_heartbeat_phase(const char *phase)
{
	pthread_mutex_lock(&hb.mu);
	if (hb.running) {
		char kind[sizeof(hb.kind)];
		snprintf(hb.phase, sizeof(hb.phase), "%s", phase);
		parse_counter(hb.phase, kind, sizeof(kind), &hb.done, &hb.total);
		if (strcmp(kind, hb.kind)) {
			snprintf(hb.kind, sizeof(hb.kind), "%s", kind);
			hb.t_phase = kg_now_ns();
		}
	}
	pthread_mutex_unlock(&hb.mu);
}

void kg_heartbeat_stop(void)
{
	pthread_mutex_lock(&hb.mu);
	int was = hb.running;
	hb.stop = 1;
	hb.running = 0;
	pthread_cond_broadcast(&hb.cv);
	pthread_mutex_unlock(&hb.mu);
	if (was)
		pthread_join(hb.th, NULL);
}

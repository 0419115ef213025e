/* Fuzz harness: the protobuf messages that come from an agent plugin or its helper process
 * (proto/kgate.proto) and the frames they travel in (plugins/frame.c). The first byte picks the
 * message; every string of what unpacks is read to its end, as the search loop reads it. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FUZZ_NAME "proto"
#include "plugins/plugin.h"
#include "proto/kgate.pb-c.h"
#include "tests/fuzz/fuzz_main.h"

static volatile size_t sink;

static void walk_str(const char *s)
{
	if (s)
		sink += strlen(s);
}

static void response(const uint8_t *p, size_t n)
{
	Kgate__V1__ProposeResponse *r = kgate__v1__propose_response__unpack(NULL, n, p);
	if (!r)
		return;
	for (size_t i = 0; i < r->n_ideas; i++)
		walk_str(r->ideas[i]);
	for (size_t i = 0; i < r->n_candidates; i++) {
		walk_str(r->candidates[i]->source);
		walk_str(r->candidates[i]->name);
		sink += r->candidates[i]->idea < r->n_ideas;
	}
	walk_str(r->error);
	walk_str(r->log);
	kgate__v1__propose_response__free_unpacked(r, NULL);
}

static void frame(const uint8_t *p, size_t n)
{
	int fds[2];
	if (pipe(fds))
		abort();
	fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
	/* what fits in the pipe; the reader then sees the end (EOF) or a short frame */
	ssize_t w = write(fds[1], p, n > 65536 ? 65536 : n);
	(void)w;
	close(fds[1]);
	uint8_t *out = NULL;
	size_t len = 0;
	kg_error e = {0};
	if (!kg_frame_read(fds[0], 1 << 20, 1000, &out, &len, &e)) {
		response(out, len);
		free(out);
	}
	close(fds[0]);
}

static void fuzz_setup(void)
{
}

static void fuzz_one(const uint8_t *data, size_t len)
{
	if (!len)
		return;
	const uint8_t *p = data + 1;
	size_t n = len - 1;
	switch (data[0] % 6) {
	case 0:
		response(p, n);
		break;
	case 1: {
		Kgate__V1__HostReply *r = kgate__v1__host_reply__unpack(NULL, n, p);
		if (r) {
			walk_str(r->error);
			walk_str(r->plugin_name);
			response(r->payload.data, r->payload.len);
			kgate__v1__host_reply__free_unpacked(r, NULL);
		}
		break;
	}
	case 2: {
		Kgate__V1__HostCall *c = kgate__v1__host_call__unpack(NULL, n, p);
		if (c)
			kgate__v1__host_call__free_unpacked(c, NULL);
		break;
	}
	case 3: {
		Kgate__V1__AgentConfig *c = kgate__v1__agent_config__unpack(NULL, n, p);
		if (c) {
			for (size_t i = 0; i < c->n_settings; i++)
				walk_str(c->settings[i]->key), walk_str(c->settings[i]->value);
			kgate__v1__agent_config__free_unpacked(c, NULL);
		}
		break;
	}
	case 4: {
		Kgate__V1__ProposeRequest *q = kgate__v1__propose_request__unpack(NULL, n, p);
		if (q)
			kgate__v1__propose_request__free_unpacked(q, NULL);
		break;
	}
	default:
		frame(p, n);
	}
}

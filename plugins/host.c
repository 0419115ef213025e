/* The helper process that isolates an agent plugin from kgate (`kgate agent-host PLUGIN`): it
 * loads the plugin, then relays HostCall frames from fd 3 to the plugin and HostReply frames
 * back, until kgate closes the channel. If the plugin crashes or hangs, only this process dies. */
#include "plugins/plugin.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/kgate.pb-c.h"

static int send_reply(int fd, int status, const char *error, const uint8_t *payload, size_t len,
		      const struct kg_plugin *p)
{
	Kgate__V1__HostReply r = KGATE__V1__HOST_REPLY__INIT;
	r.status = status;
	r.error = (char *)(error ? error : "");
	r.payload.data = (uint8_t *)payload;
	r.payload.len = payload ? len : 0;
	if (p && p->api) {
		r.plugin_name = (char *)p->api->name;
		r.abi_major = p->api->abi_major;
		r.abi_minor = p->api->abi_minor;
	}
	size_t n = kgate__v1__host_reply__get_packed_size(&r);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	kgate__v1__host_reply__pack(&r, buf);
	kg_error e = {0};
	int rc = kg_frame_write(fd, buf, n, &e);
	free(buf);
	if (rc)
		fprintf(stderr, "kgate agent-host: %s\n", e.msg);
	return rc;
}

/* Runs one call against the plugin and answers it. Returns <0 only when the channel is broken. */
static int serve(int fd, struct kg_plugin *p, void **inst, const Kgate__V1__HostCall *call)
{
	const struct kg_agent_plugin *api = p->api;
	char *err = NULL;
	int rc;
	switch (call->kind) {
	case KGATE__V1__HOST_CALL__KIND__KIND_CREATE:
		if (*inst)
			return send_reply(fd, -EALREADY, "agent already created", NULL, 0, p);
		rc = api->create(call->payload.data, call->payload.len, inst, &err);
		if (rc >= 0 && !*inst)
			rc = -EPROTO;
		rc = send_reply(fd, rc < 0 ? rc : 0, err ? err : rc < 0 ? "create failed" : "", NULL, 0, p);
		break;
	case KGATE__V1__HOST_CALL__KIND__KIND_PROPOSE: {
		if (!*inst)
			return send_reply(fd, -EINVAL, "propose before create", NULL, 0, p);
		uint8_t *resp = NULL;
		size_t len = 0;
		rc = api->propose(*inst, call->payload.data, call->payload.len, &resp, &len, &err);
		if (rc >= 0 && !resp)
			rc = -EPROTO;
		if (rc < 0)
			rc = send_reply(fd, rc, err ? err : "propose failed", NULL, 0, p);
		else
			rc = send_reply(fd, 0, "", resp, len, p);
		if (resp)
			api->free_buf(resp);
		break;
	}
	default:
		rc = send_reply(fd, -EINVAL, "unknown call", NULL, 0, p);
	}
	if (err)
		api->free_buf(err);
	return rc;
}

int kg_agent_host_main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: kgate agent-host PLUGIN (started by kgate search, on fd %d)\n", KG_AGENT_HOST_FD);
		return 2;
	}
	const int fd = KG_AGENT_HOST_FD;
	struct kg_plugin p;
	kg_error e = {0};
	int rc = kg_plugin_load(argv[1], &p, &e);
	/* The first frame always answers "did the plugin load", so kgate can report why not. */
	if (send_reply(fd, rc, rc ? e.msg : "", NULL, 0, rc ? NULL : &p) || rc) {
		if (!rc)
			kg_plugin_unload(&p);
		return 3;
	}
	void *inst = NULL;
	int status = 0;
	for (;;) {
		uint8_t *frame = NULL;
		size_t len = 0;
		rc = kg_frame_read(fd, KG_AGENT_MAX_FRAME, -1, &frame, &len, &e);
		if (rc == -EPIPE)
			break; /* kgate is done with us */
		if (rc) {
			fprintf(stderr, "kgate agent-host: %s\n", e.msg);
			status = 3;
			break;
		}
		Kgate__V1__HostCall *call = kgate__v1__host_call__unpack(NULL, len, frame);
		free(frame);
		if (!call) {
			fprintf(stderr, "kgate agent-host: malformed frame from kgate\n");
			status = 3;
			break;
		}
		rc = serve(fd, &p, &inst, call);
		kgate__v1__host_call__free_unpacked(call, NULL);
		if (rc) {
			status = 3;
			break;
		}
	}
	if (inst)
		p.api->destroy(inst);
	kg_plugin_unload(&p);
	return status;
}

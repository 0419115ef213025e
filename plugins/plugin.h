/* The core's side of the agent plugin ABI (include/kgate/agent.h): finding and loading a plugin,
 * and talking to it either in this process or through the isolating helper process
 * (`kgate agent-host`), which speaks length-prefixed protobuf frames over a socket pair. */
#ifndef KG_PLUGIN_H
#define KG_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <kgate/agent.h>

#include "kg_common.h"

/* Largest frame either side accepts: bounds the memory a misbehaving peer can make us allocate. */
#define KG_AGENT_MAX_FRAME (16u << 20)

/* ---- loader (plugins/loader.c) ---- */

struct kg_plugin {
	void *dl;
	const struct kg_agent_plugin *api;
	char path[4096];
};

/* Maps a built-in name ("replay", "openai", "anthropic") to its .so: $KGATE_PLUGINDIR, the build
 * tree next to the running binary (build/plugins/), then KG_PLUGINDIR. Anything with a '/' or
 * ending in ".so" is taken as a path. */
int kg_plugin_resolve(const char *name, char *out, size_t outsz, kg_error *e);
/* dlopen + the exported symbol + the checks: major version, struct size, every entry point. */
int kg_plugin_load(const char *path, struct kg_plugin *p, kg_error *e);
/* Validates a table (exposed for the tests). */
int kg_plugin_check(const struct kg_agent_plugin *api, const char *path, kg_error *e);
void kg_plugin_unload(struct kg_plugin *p);

/* ---- frames (plugins/frame.c) ---- */

/* Writes a 4-byte big-endian length and the bytes; never raises SIGPIPE. */
int kg_frame_write(int fd, const void *data, size_t len, kg_error *e);
/* Reads one frame of at most max bytes into *out (malloc'ed, caller frees). timeout_ms <= 0 waits
 * for ever; -ETIMEDOUT when the deadline passes, -EPIPE on end of file, -EMSGSIZE when too big. */
int kg_frame_read(int fd, size_t max, int timeout_ms, uint8_t **out, size_t *len, kg_error *e);

/* ---- client (plugins/client.c) ---- */

enum kg_agent_isolation { KG_AGENT_PROCESS = 0, KG_AGENT_INPROC };

struct kg_agent_opts {
	const char *plugin; /* name or path */
	enum kg_agent_isolation isolation;
	const char *host_exe; /* runs `HOST agent-host PLUGIN`; NULL: /proc/self/exe */
	int timeout_s; /* per propose, process isolation only; 0: none */
	const uint8_t *config; /* serialized AgentConfig; copied */
	size_t config_len;
};

struct kg_agent;

/* Loads the plugin and creates an instance. */
int kg_agent_open(const struct kg_agent_opts *o, struct kg_agent **out, kg_error *e);
/* One propose call. *resp is a serialized ProposeResponse, malloc'ed, caller frees. Under process
 * isolation a crash or timeout of the plugin is an error here (-ECHILD / -ETIMEDOUT) and the next
 * call starts a fresh helper. */
int kg_agent_propose(struct kg_agent *a, const uint8_t *req, size_t req_len, uint8_t **resp, size_t *resp_len,
		     kg_error *e);
const char *kg_agent_name(const struct kg_agent *a);
void kg_agent_close(struct kg_agent *a);

/* ---- helper process (plugins/host.c) ---- */

/* `kgate agent-host PLUGIN`: loads PLUGIN and serves frames on fd 3 until end of file. stdout is
 * redirected to stderr so that a chatty plugin cannot corrupt the protocol. Returns an exit code. */
int kg_agent_host_main(int argc, char **argv);
#define KG_AGENT_HOST_FD 3

#endif

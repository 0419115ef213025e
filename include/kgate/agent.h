/* kgate agent plugin ABI, version 1. A plugin is a shared object that exports one function,
 * kg_agent_plugin_v1, returning a table of entry points. Everything else crosses as serialized
 * protobuf messages of kgate.proto (installed under share/kgate/proto), so the ABI never changes
 * when a message grows a field. This header is self-contained on purpose: vendors need nothing
 * else from kgate. */
#ifndef KGATE_AGENT_H
#define KGATE_AGENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A different major version is refused by the loader. A newer minor version only appends fields
 * to struct kg_agent_plugin; struct_size tells the core which ones are there. */
#define KG_AGENT_ABI_MAJOR 1
#define KG_AGENT_ABI_MINOR 0
#define KG_AGENT_SYMBOL "kg_agent_plugin_v1"

/* Ownership, for every entry point:
 *   - bytes passed in (config, request) belong to the core and are valid only during the call;
 *   - bytes and strings the plugin hands out (*response, *error) are allocated by the plugin and
 *     released by the core with the plugin's own free_buf, never with free();
 *   - the instance returned by create is released with destroy, exactly once.
 * The core calls one instance from one thread at a time. Plugins must not write to stdout (the
 * process isolation helper keeps it for itself) and must never print secrets. */
struct kg_agent_plugin {
	uint32_t abi_major; /* KG_AGENT_ABI_MAJOR */
	uint32_t abi_minor; /* KG_AGENT_ABI_MINOR */
	uint32_t struct_size; /* sizeof(struct kg_agent_plugin) as the plugin was built */
	const char *name; /* short, static: "openai" */
	const char *description; /* one line, static */

	/* config: a serialized kgate.v1.AgentConfig. Returns 0 and an instance in *agent, or a negative
	 * errno and, optionally, a message in *error (e.g. "unknown setting 'modle'"). */
	int (*create)(const uint8_t *config, size_t config_len, void **agent, char **error);

	/* request: a serialized kgate.v1.ProposeRequest. Returns 0 and a serialized
	 * kgate.v1.ProposeResponse in *response / *response_len; an agent that could not propose this
	 * round (endpoint unreachable, quota) still returns 0 with ProposeResponse.error set. A negative
	 * errno (with an optional *error) means the plugin itself failed. */
	int (*propose)(void *agent, const uint8_t *request, size_t request_len, uint8_t **response,
		       size_t *response_len, char **error);

	/* Releases a buffer or string handed out by create or propose. */
	void (*free_buf)(void *buf);

	void (*destroy)(void *agent);
};

/* The one exported symbol. Returns a table with static storage duration. */
typedef const struct kg_agent_plugin *(*kg_agent_plugin_fn)(void);

#if defined(__GNUC__) || defined(__clang__)
#define KG_AGENT_EXPORT __attribute__((visibility("default")))
#else
#define KG_AGENT_EXPORT
#endif

KG_AGENT_EXPORT const struct kg_agent_plugin *kg_agent_plugin_v1(void);

#ifdef __cplusplus
}
#endif
#endif

/* The table of commands contributed by other rooms: the search loop (agents/), the helper
 * process it runs agent plugins in, and the compile cache's upkeep (verifier/). */
#include <stddef.h>

#include "agents/search.h"
#include "cli/commands.h"
#include "verifier/compile/cache.h"

const struct kg_command kg_extra_commands[] = {
	{"search", "search for a fast correct kernel with an agent (kgate search --help)", kg_cmd_search, 1},
	/* Internal: started by `kgate search` itself to isolate an agent plugin (fd 3 protocol); it
	 * dies with its parent, which the supervisor of the search reaps. */
	{"agent-host", "(internal) host an agent plugin for kgate search", kg_cmd_agent_host, 0},
	{"cache", "stats|clear|path: the compile cache (kgate cache --help)", kg_cmd_cache, 0},
	{NULL, NULL, NULL, 0},
};

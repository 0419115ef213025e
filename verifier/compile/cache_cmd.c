/* `kgate cache stats|clear|path`: the compile cache (cache.h) seen and emptied from the command
 * line. The verifier owns the cache, so it owns the command; cli/commands.c lists it. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "verifier/compile/cache.h"

static int usage(FILE *f, int rc)
{
	fprintf(f, "usage: kgate cache stats|clear|path\n"
		   "  stats   where the compile cache is, its entries, their size and the bound\n"
		   "  clear   remove every entry\n"
		   "  path    print the cache directory\n"
		   "environment: KGATE_CACHE_DIR (else $XDG_CACHE_HOME/kgate, else ~/.cache/kgate),\n"
		   "KGATE_CACHE_MAX_MB (default %d; 0 turns the cache off)\n",
		   KG_CACHE_DEFAULT_MAX_MB);
	return rc;
}

int kg_cmd_cache(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
		return usage(stdout, 0);
	if (argc != 2 || (strcmp(argv[1], "stats") && strcmp(argv[1], "clear") && strcmp(argv[1], "path")))
		return usage(stderr, 2);
	kg_error e = {0};
	char dir[4096];
	if (!strcmp(argv[1], "path")) {
		if (kg_cache_dir(dir, sizeof(dir), &e)) {
			fprintf(stderr, "kgate cache: %s\n", e.msg);
			return 2;
		}
		printf("%s\n", dir);
		return 0;
	}
	struct kg_cache *c = NULL;
	int rc = kg_cache_open(NULL, &c, &e);
	if (rc) {
		fprintf(stderr, "kgate cache: %s\n", e.msg);
		return 2;
	}
	if (!strcmp(argv[1], "clear")) {
		rc = kg_cache_clear(c, &e);
		if (rc >= 0)
			printf("removed %d entries from %s\n", rc, kg_cache_path(c));
	} else {
		struct kg_cache_stats st;
		rc = kg_cache_stats(c, &st, &e);
		if (!rc)
			printf("compile cache %s: %d entries, %.1f MiB of %.0f MiB\n", kg_cache_path(c), st.entries,
			       (double)st.bytes / (1 << 20), (double)st.max_bytes / (1 << 20));
	}
	if (rc < 0)
		fprintf(stderr, "kgate cache: %s\n", e.msg);
	kg_cache_close(c);
	return rc < 0 ? 3 : 0;
}

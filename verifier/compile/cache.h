/* The compile cache: a successful sandboxed build (the .so and the compiler's log) stored under a
 * SHA-256 key of everything that decides its bytes, so that a re-run of the same candidate or a
 * search that meets a source again skips the compiler. Per user, size-bounded, integrity-checked. */
#ifndef KG_CACHE_H
#define KG_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "kg_common.h"

/* Bumped whenever an entry's meaning or layout changes: part of every key and every entry. */
#define KG_CACHE_FORMAT 1
#define KG_CACHE_DEFAULT_MAX_MB 1024
/* The largest artifact stored (a candidate can ask for a huge .so; caching it buys nothing). */
#define KG_CACHE_ENTRY_MAX (128u << 20)

struct kg_cache;

/* Where the cache lives: $KGATE_CACHE_DIR, else $XDG_CACHE_HOME/kgate, else ~/.cache/kgate (an
 * absolute path is required of either variable). -errno when none can be named. */
int kg_cache_dir(char *out, size_t outsz, kg_error *e);

/* Opens (creating, 0700) the cache directory and its compile/ store. Refuses, with a sentence in
 * e, a directory that is not owned by the effective user, is group- or world-writable, or is a
 * symbolic link; -ECANCELED when KGATE_CACHE_MAX_MB is 0 (the cache is off). dir NULL:
 * kg_cache_dir's. The size bound is KGATE_CACHE_MAX_MB (MiB; default 1024). */
int kg_cache_open(const char *dir, struct kg_cache **out, kg_error *e);
void kg_cache_close(struct kg_cache *c);
const char *kg_cache_path(const struct kg_cache *c);
/* Overrides the size bound (tests). */
void kg_cache_set_max(struct kg_cache *c, uint64_t max_bytes);

/* What a compile's key is made of. Every field is hashed with its tag and length, so that no two
 * different inputs can produce the same byte stream. */
struct kg_cache_key_in {
	const char *backend; /* "cpu" */
	const char *arch; /* the GPU architecture asked for ("90a"); NULL or "" when none */
	const char *const *argv; /* the compile command exactly as the sandbox runs it; argv[0] is the
				  * compiler, whose identity (content hash) is hashed too */
	const char *const *envp;
	const char *const *mounts; /* host paths shown to the compiler besides /usr (NULL-terminated) */
	const char *include_dir; /* the host directory holding kgate/ (the candidate's headers) */
	const char *script; /* an interpreted builder's host path, hashed by content; NULL: none */
	const char *tool_version; /* what the tool says it is beyond its binary (torch's version); NULL */
	const void *src; /* the exact bytes copied into the sandbox */
	size_t src_len;
};

/* The key; -errno when an input cannot be read (the compiler binary, the headers): then no cache. */
int kg_cache_key(const struct kg_cache_key_in *in, uint8_t key[32], kg_error *e);
/* The compiler's identity as hashed into keys: its resolved path, size and SHA-256 of its bytes,
 * computed once per process and binary (kept while its size, mtime, ctime and inode hold). */
int kg_cache_tool_id(const char *path, uint8_t id[32], kg_error *e);

/* Looks the key up. A hit (1) writes the artifact to so_path (created new, 0755) and the log into
 * log (NUL-terminated, cut at logsz), and marks the entry recently used. A miss is 0; an entry
 * that is damaged, truncated, tampered with, not a regular file, or not the user's is a miss too:
 * it is removed and why is put in note (may be NULL). -errno only when so_path cannot be written. */
int kg_cache_get(struct kg_cache *c, const uint8_t key[32], const char *so_path, char *log, size_t logsz,
		 char *note, size_t notesz, kg_error *e);
/* Stores the artifact at so_path and its log under key, atomically (a temporary file renamed into
 * place), then evicts the least recently used entries beyond the size bound. */
int kg_cache_put(struct kg_cache *c, const uint8_t key[32], const char *so_path, const char *log, kg_error *e);

struct kg_cache_stats {
	int entries;
	uint64_t bytes, max_bytes;
	int evicted; /* by this call (kg_cache_evict) */
};
/* Removes the least recently used entries (by mtime, which a hit refreshes) until the store fits
 * max_bytes, and temporary files left by a crashed writer; fills st (may be NULL). */
int kg_cache_evict(struct kg_cache *c, uint64_t max_bytes, struct kg_cache_stats *st, kg_error *e);
int kg_cache_stats(struct kg_cache *c, struct kg_cache_stats *st, kg_error *e);
/* Removes every entry; returns how many, or -errno. */
int kg_cache_clear(struct kg_cache *c, kg_error *e);

/* `kgate cache stats|clear|path` (cache_cmd.c, listed in cli/commands.c). */
int kg_cmd_cache(int argc, char **argv);

#endif

/* The runner's mapping of the parent's arena: flat, or paged (laid out and sealed at start from
 * the parent's page map: read-only inputs, read-write outputs, inaccessible guard pages). */
#ifndef KG_RUNNER_ARENA_H
#define KG_RUNNER_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "runner/wire.h"

struct kg_rarena {
	unsigned char *base;
	size_t size; /* both files */
	size_t in_size; /* paged: the inputs' file, mapped first; 0 when flat */
	int paged;
	size_t n_ranges; /* paged: the tensor pages mapped at start, sorted by their start */
	struct kg_wire_range *ranges;
};

/* Maps fd 4 (and, paged, fd 5 through the page map on fd 6, then seals the range). */
int kg_rarena_map(struct kg_rarena *ra, int tables_fd, char *err, size_t errsz);
/* Paged: every tensor of a SETUP lies within pages mapped at start. Flat: nothing to check. */
int kg_rarena_check(const struct kg_rarena *ra, const struct kg_wire_tensor *t, int n, char *err, size_t errsz);

#endif

/* The runner's mapping of the parent's arena (flat, or paged with read-only inputs and guard
 * pages) and the fault line it writes when the hosted code touches a protected page. */
#ifndef KG_RUNNER_ARENA_H
#define KG_RUNNER_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include "runner/wire.h"

/* What the runner writes to stderr before dying of a fault inside the arena; the parent reads the
 * offset after it (hex) to name the tensor. Shared with verifier/trial.c. */
#define KG_RARENA_FAULT_TAG "kgate-run: fault at arena offset "

struct kg_rarena {
	unsigned char *base;
	size_t size; /* both files */
	size_t in_size; /* paged: the inputs' file, mapped first; 0 when flat */
	int paged;
};

/* Maps fd 4 (and fd 5 where the parent passed a paged arena's inputs). */
int kg_rarena_map(struct kg_rarena *ra, char *err, size_t errsz);
/* Paged: maps each tensor's pages (inputs read-only) and leaves every other page of the range
 * unmapped (PROT_NONE), for the tensors of a SETUP. Flat: nothing. */
int kg_rarena_guard(struct kg_rarena *ra, const struct kg_wire_tensor *t, int n, char *err, size_t errsz);
/* Installs the SIGSEGV/SIGBUS handler (on its own stack) that writes the fault line. */
void kg_rarena_fault_names(struct kg_rarena *ra);

#endif

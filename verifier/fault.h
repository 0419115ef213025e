/* A fault in the candidate's process named from the trusted layout: the runner's fault line (a
 * claim) gives an offset, and only where the paged arena's layout says that offset is protected in
 * that process (an input's read-only page, an unmapped guard page) does it name the tensor. */
#ifndef KG_FAULT_H
#define KG_FAULT_H

#include <stdint.h>

#include "kg_vocab.h"
#include "sandbox/sandbox.h"
#include "verifier/arena.h"

struct kg_fault {
	enum kg_reason_code code; /* check.input_modified or check.canary */
	int slot; /* the tensor it names */
	int64_t index; /* element of slot for a store into an input, else -1 */
	char msg[320];
};

/* 1 and f filled when o is a death by SIGSEGV or SIGBUS whose last fault line names an offset the
 * layout of a protects; 0 otherwise (a crash like any other). Either way the run is rejected: this
 * only chooses the words. */
int kg_fault_name(const struct kg_arena *a, const struct kg_sb_outcome *o, struct kg_fault *f);
/* The offset of the last fault line in text (n bytes); 0 when there is none. */
int kg_fault_line(const char *text, size_t n, uint64_t *off);

#endif

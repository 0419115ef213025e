/* How a sandboxed process ended, in the verifier's words: the reason code an end earns a
 * candidate and a sentence for the report. The sandbox only says what happened (sandbox.h). */
#ifndef KG_ENDS_H
#define KG_ENDS_H

#include <stddef.h>

#include "kg_vocab.h"
#include "sandbox/sandbox.h"

/* sandbox.timeout for a timeout, ...; an exit or a kill in the middle of the protocol is a crash. */
enum kg_reason_code kg_end_reason(enum kg_sb_end end);
/* A process that sealed itself (kg_sb_seal_calls) and then died of a SIGSYS that no named filter
 * explains: the seal's own filter killed it for an open or an executable mapping. */
int kg_end_sealed_call(const struct kg_sb_outcome *o, int sealed);
/* "the process was killed by SIGSEGV", "denied system call socket: ..." */
void kg_end_describe(const struct kg_sb_outcome *o, char *out, size_t outsz);

#endif

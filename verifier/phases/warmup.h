/* A JIT candidate's warm-up on a GPU (warmup.c): a candidate (Triton, torch.compile in its module:
 * kg_warmup_needed) has its kernels compiled ahead of the run, at every planned shape, in a
 * sandboxed process of their own, into the run's cache directory (jit, for the candidate's
 * session, read-only there). */
#ifndef KG_WARMUP_H
#define KG_WARMUP_H

#include <stddef.h>

#include "verifier/run.h"

int kg_warmup_needed(const char *src, size_t len);
int kg_warmup_torch(const struct kg_session_opts *o, const char *shapes, const char *jit_dir, double wall_s,
		    char *log, size_t logsz, kg_error *e);
/* 0, or -1 after recording why (compile.error: the candidate's; an internal error: kgate's). */
int kg_warmup_run(struct kg_run *r, const struct kg_session_opts *o, char *jit, size_t jitsz);

#endif

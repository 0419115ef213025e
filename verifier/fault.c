/* Naming the candidate's faults in the paged arena. The signal comes from the sandbox (trusted),
 * the offset from the runner's fault line (the candidate's process could forge it), so the offset
 * is believed only where the trusted layout says a fault can happen, and only to choose the reason's
 * words: an input's page (read-only there), or a page no tensor touches (unmapped there). */
#include "verifier/fault.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "runner/arena.h"
#include "verifier/dtype.h"

int kg_fault_line(const char *text, size_t n, uint64_t *off)
{
	const char *tag = KG_RARENA_FAULT_TAG "0x", *last = NULL;
	size_t tl = strlen(tag);
	for (size_t i = 0; text && i + tl <= n; i++)
		if (!memcmp(text + i, tag, tl))
			last = text + i + tl;
	if (!last)
		return 0;
	uint64_t v = 0;
	int digits = 0;
	for (const char *p = last; p < text + n && digits < 16; p++, digits++) {
		int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10 : -1;
		if (d < 0)
			break;
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return 0;
	*off = v;
	return 1;
}

/* Whether the page holding off is writable in the candidate's process: an output touches it. */
static int page_writable(const struct kg_arena *a, uint64_t off)
{
	uint64_t page = off / KG_ARENA_PAGE * KG_ARENA_PAGE;
	for (int i = a->n_in; i < a->n_in + a->n_out; i++) {
		uint64_t lo = a->slot[i].off / KG_ARENA_PAGE * KG_ARENA_PAGE, hi = a->slot[i].off + a->slot[i].bytes;
		if (page >= lo && page < hi)
			return 1;
	}
	return 0;
}

int kg_fault_name(const struct kg_arena *a, const struct kg_sb_outcome *o, struct kg_fault *f)
{
	uint64_t off, pos;
	int slot, side;
	memset(f, 0, sizeof(*f));
	if (!a->paged || o->end != KG_SB_END_SIGNAL || (o->signo != SIGSEGV && o->signo != SIGBUS) ||
	    !kg_fault_line(o->output, o->output_len, &off) || page_writable(a, off))
		return 0;
	int at = kg_arena_where(a, off, &slot, &side, &pos);
	const char *sig = o->signo == SIGSEGV ? "SIGSEGV" : "SIGBUS";
	f->slot = slot;
	f->index = -1;
	if (at == KG_ARENA_AT_TENSOR && slot < a->n_in) {
		f->code = KG_R_CHECK_INPUT_MODIFIED;
		f->index = (int64_t)(pos / kg_dtype_size(a->slot[slot].dtype));
		snprintf(f->msg, sizeof(f->msg),
			 "a store into the input at element %lld faulted: inputs are mapped read-only in the "
			 "candidate's process (killed by %s)",
			 (long long)f->index, sig);
		return 1;
	}
	if (at == KG_ARENA_AT_BAND) {
		char where[64];
		if (pos == 0)
			snprintf(where, sizeof(where), "just %s", side > 0 ? "past its end" : "before its start");
		else
			snprintf(where, sizeof(where), "%llu bytes %s", (unsigned long long)pos,
				 side > 0 ? "past its end" : "before its start");
		f->code = KG_R_CHECK_CANARY;
		snprintf(f->msg, sizeof(f->msg), "an access %s faulted: %s (killed by %s)", where,
			 side < 0 && slot < a->n_in ? "the bytes in front of an input are read-only in the candidate's process"
						    : "the page next to every tensor is unmapped in the candidate's process",
			 sig);
		return 1;
	}
	return 0;
}

/* The control protocol between the verifier (parent) and kgate-run (the process that hosts a
 * candidate or a reference). Fixed-size records over a SOCK_SEQPACKET pair; tensors travel in a
 * shared memory arena, never on this channel. Nothing the runner sends is trusted by the parent
 * beyond what it can cross-check. */
#ifndef KG_WIRE_H
#define KG_WIRE_H

#include <stdint.h>

#include <kgate/kernel.h>

#define KG_WIRE_MAGIC 0x6b67775au /* "kgwZ" */

/* fds the runner finds at start: */
#define KG_WIRE_CTL_FD 3 /* SOCK_SEQPACKET to the parent */
#define KG_WIRE_ARENA_FD 4 /* memfd holding the arena (a paged arena: its outputs); a device runner's
			    * verified runs: kgate-device's exported allocation (--device-arena) */
#define KG_WIRE_INPUT_FD 5 /* a paged arena's inputs: sealed, mapped read-only before the outputs */
#define KG_WIRE_MAP_FD 6 /* a paged arena's page map (below): what to map at start, the rest guards */
/* a device runner's gate page (--gate; its arena is kgate-device's, never paged, so fd 5 is free; the tensor tables then follow it):
 * device/wire.h's KG_DEV_GATE_* words, which mark each call's ends on the device */
#define KG_WIRE_GATE_FD 5
/* The tensor tables, a sealed memfd handed after the arena's fds (its number on the runner's
 * command line: --tables FD): below. */

/* The tensor tables: every layout's tensors (one table per shape of the run), written and sealed
 * by the parent before the runner starts. A header, count table heads, then the tensors each head
 * points to (inputs, then outputs). SETUP names the table of the next runs by its number, so the
 * count of tensors is bounded by the memory the file takes, never by a command's size. To the
 * runner the file is data to check (kg_wire_table_get, runner/table.c): a count, an offset or a
 * shape that does not fit is a failed SETUP. Nothing the runner makes of it comes back to the
 * parent but SETUP's status: the parent judges by its own layout. */
struct kg_wire_tables {
	uint32_t magic; /* KG_WIRE_MAGIC */
	uint32_t count;
};
struct kg_wire_table {
	uint64_t at; /* byte offset in the file of its first struct kg_wire_tensor (8-aligned) */
	uint32_t n_in, n_out;
};

/* The page map of a paged arena, a sealed memfd: a header, then count ranges of arena offsets
 * (page-aligned, each within one file): the tensor pages of every shape of the run, as many as the
 * file holds. The runner maps them at start and seals the whole arena, so that no guard page can be
 * opened later. */
struct kg_wire_pagemap {
	uint32_t magic; /* KG_WIRE_MAGIC */
	uint32_t count;
};
struct kg_wire_range {
	uint64_t lo, hi;
};

enum kg_wire_op {
	KG_OP_HELLO = 1, /* runner -> parent once it is initialised and filtered */
	KG_OP_LOAD, /* dlopen the .so at path, check kg_abi_version, resolve kg_forward */
	KG_OP_SETUP, /* the tensor table (cmd.table) for the next runs; maps nothing */
	/* UPLOAD, DOWNLOAD and SETTLE: a CUDA runner under a tool (exact buffers) only. Every other
	 * device runner's arena is kgate-device's (device/wire.h), which does them itself and flushes
	 * the L2; a host arena is written by the parent with streaming stores, which leave nothing in
	 * any cache. No runner flushes anything: a flush in the candidate's process is the candidate's
	 * to skip (and a command it could serve early). */
	KG_OP_UPLOAD, /* copy the host arena's tensors to their exact device buffers */
	/* 5 was FLUSH: retired, not reused (a runner that still knows it reads nothing new into it) */
	KG_OP_RUN = KG_OP_UPLOAD + 2, /* call kg_forward (or the entry cmd.entry names) once and time it */
	KG_OP_DOWNLOAD, /* CUDA: copy the arena back; outputs as they were when the call's stream was done */
	KG_OP_SETTLE, /* wait delay_ms (CUDA: after a device-wide sync), then DOWNLOAD the live arena */
	KG_OP_NOP, /* round-trip calibration */
	KG_OP_QUIT,
};

static inline const char *kg_wire_op_name(uint32_t op)
{
	static const char *const names[] = {"?",   "HELLO",    "LOAD",	 "SETUP", "UPLOAD", "(retired)",
					    "RUN", "DOWNLOAD", "SETTLE", "NOP",	  "QUIT"};
	return op < sizeof(names) / sizeof(names[0]) ? names[op] : "an unknown command";
}

struct kg_wire_tensor {
	uint64_t offset; /* byte offset in the arena */
	int32_t dtype;
	int32_t ndim; /* 0: a scalar, one element */
	int64_t shape[KG_MAX_DIMS];
};

struct kg_wire_cmd {
	uint32_t magic;
	uint32_t op;
	uint64_t seq;
	uint64_t arena_size; /* SETUP: bytes of the arena in use (UPLOAD/DOWNLOAD copy this much) */
	uint32_t n_in, n_out; /* SETUP: the table's counts, which it must match */
	uint32_t table, pad0; /* SETUP: which table of the tensor tables */
	uint32_t delay_ms; /* SETTLE */
	uint32_t entry; /* RUN: which exported function, KG_ENTRY_* below */
	char path[512]; /* LOAD: path inside the sandbox */
	/* RUN: a batch of `sets` calls back to back (0 or 1: one call), call k on every tensor at its
	 * offset + k * stride: kgate-device staged that many input sets (a batched timed call) */
	uint32_t sets, pad;
	uint64_t stride;
	/* RUN of a gated call (0: not gated): call k's token is gate + k. The runner queues a wait for
	 * the gate page's RELEASED >= the token on the stream before call k and a write of DONE = the
	 * token after it, and stores ARMED = gate from the CPU once the first wait is queued
	 * (device/wire.h). kgate-device snapshots a set's outputs when its DONE comes: the reply does
	 * not end the call, the stream's mark does. */
	uint32_t gate, pad2;
};

enum kg_wire_status {
	KG_WS_OK = 0,
	KG_WS_ERROR = 1, /* the runner could not do it (msg says why) */
	KG_WS_ABI = 2, /* LOAD: kg_abi_version missing or different */
	KG_WS_NOSYM = 3, /* LOAD: kg_forward missing */
	KG_WS_CUDA = 4, /* a CUDA call failed (msg names it); the kernel faulted or hung the context */
};

struct kg_wire_reply {
	uint32_t magic;
	uint32_t op;
	uint64_t seq;
	int32_t status; /* kg_wire_status */
	int32_t rc; /* RUN: what kg_forward returned */
	uint64_t elapsed_ns; /* RUN: the runner's own measure (CPU clock or CUDA events) */
	uint64_t info; /* HELLO: measured bandwidth ceiling in MB/s (0: none; a device's is the keeper's);
			* RUN: ns the device stayed busy after the call's stream */
	uint64_t snap_ns; /* unused: 0 (the outputs' snapshot is kgate-device's) */
	uint32_t flags; /* RUN: KG_RUN_* below, what the runner found and undid after the call; HELLO:
			 * KG_HELLO_* */
	uint32_t tid; /* HELLO: the loader thread's id as the runner sees it (0: none); it must be gone
		       * once LOAD is answered */
	char msg[400];
};

/* RUN entries. A task's trusted reference may export kg_error_terms beside kg_forward, same
 * signature: it writes each output element's allowance (verifier/judge/compare.h); the parent asks for
 * it only of a reference whose task says `terms: reference`, never of a candidate. */
#define KG_ENTRY_FORWARD 0u
#define KG_ENTRY_TERMS 1u
/* A trusted torch runner on a device hosting a baseline: torch.compile of its module (the first
 * call compiles); KG_ENTRY_FORWARD is its eager forward. Never asked of a candidate. */
#define KG_ENTRY_COMPILED 2u

/* HELLO flags: the gate page (--gate) is mapped and registered, RUN may be gated; without it the
 * runner serves ungated calls only (and kgate times it so) */
#define KG_HELLO_GATED 0x1u

/* RUN flags: the candidate left a persisting-L2 set-aside (cuCtxSetLimit) or an access-policy
 * window on the given stream behind; the runner reset both (and every persisting line) already. */
#define KG_RUN_L2_LIMIT 0x1u
#define KG_RUN_L2_WINDOW 0x2u

/* Table idx of the tensor tables file (buf, len bytes: the runner's own copy), checked against
 * what SETUP says (n_in, n_out) and the arena (every tensor's bytes within arena_size): the table's
 * tensors in *t (pointing into buf). 0, or -1 with err saying what does not fit (runner/table.c). */
int kg_wire_table_get(const void *buf, size_t len, uint32_t idx, uint32_t n_in, uint32_t n_out, uint64_t arena_size,
		      const struct kg_wire_tensor **t, char *err, size_t errsz);
/* A wire dtype's element size (0: not one kgate knows). */
uint64_t kg_wire_dtype_size(int32_t dtype);

#endif

/* The runner's device backends: the CPU one (host memory, wall clock) and the CUDA one (device
 * arena mirrored from the shared one, CUDA events, loaded with dlopen). The protocol loop in
 * main.c is the same for both. */
#ifndef KG_RUNNER_BACKEND_H
#define KG_RUNNER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "runner/wire.h"

struct kg_rbackend {
	const char *name;
	/* Called before the seccomp filter: create contexts, allocate, open everything needed. */
	int (*init)(struct kg_rbackend *b, void *arena, size_t arena_size, char *err, size_t errsz);
	/* fds the driver needs ioctl on after the filter (CUDA), or none. */
	int (*driver_fds)(struct kg_rbackend *b, int *fds, int max);
	/* Optional: told the tensors of the next runs (SETUP). With exact set, the CUDA backend gives
	 * each tensor its own allocation of exactly its size instead of a window into the mirrored
	 * arena, so that a memory checker sees every buffer's true bounds. */
	int (*setup)(struct kg_rbackend *b, const struct kg_wire_tensor *t, int n, int n_in, char *err, size_t errsz);
	/* Pointer the candidate sees for an arena offset. */
	void *(*ptr)(struct kg_rbackend *b, uint64_t offset);
	void *(*stream)(struct kg_rbackend *b);
	int (*upload)(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz);
	/* Calls fn around the backend's timer and fills the RUN reply: elapsed_ns (the runner's
	 * measure), info (how long the device stayed busy after the candidate's own stream finished),
	 * and flags (CUDA: what was undone in the L2). */
	int (*run)(struct kg_rbackend *b, void (*fn)(void *), void *arg, struct kg_wire_reply *r, char *err,
		   size_t errsz);
	int (*download)(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz);
	int (*settle)(struct kg_rbackend *b, uint32_t delay_ms, size_t bytes, char *err, size_t errsz);
	/* Measured memory bandwidth ceiling in MB/s (bytes read plus written), 0 when not measured. */
	uint64_t ceiling_mbps;
	int exact; /* set before init: one exact-size device buffer per tensor, no guard bands */
	/* set before init: the device arena kgate-device exported (fd 4, --device-arena BYTES), which
	 * the backend imports in place of a host arena; -1 when none */
	int device_fd;
	size_t device_bytes;
	/* Whole pages holding this struct and the state the measurements rest on (function pointers,
	 * event handles, flush buffer and size): nothing writes them after init, and main.c seals
	 * them read-only (mprotect, then mseal) before the candidate is loaded. */
	void *sealed;
	size_t sealed_len;
	int device; /* the backend drives a device: its failures are the device's (KG_WS_CUDA) */
	void *state;
	/* set before init: the gate page's fd (KG_WIRE_GATE_FD, --gate), -1 when none; a device
	 * backend that takes it marks a gated call's ends (runner/wire.h's RUN gate): gate_wait queues
	 * the wait for token tok's release on the stream, gate_arm stores ARMED (once the first wait
	 * is queued), gate_done queues DONE = tok after the set's work. NULL where not gated. */
	int gate_fd;
	int gate_ok; /* set by init: the gate page is mapped (a page it could not map: 0, and no error) */
	int (*gate_wait)(struct kg_rbackend *b, uint32_t tok, int first);
	void (*gate_arm)(struct kg_rbackend *b, uint32_t tok);
	int (*gate_done)(struct kg_rbackend *b, uint32_t tok);
};

/* A backend and its state on pages of their own, so that sealing them seals nothing else. */
#define KG_RUNNER_PAGE 4096
#define KG_RUNNER_SEALED(type, name)                                                                                 \
	static union {                                                                                               \
		type v;                                                                                              \
		unsigned char page_[(sizeof(type) + KG_RUNNER_PAGE - 1) / KG_RUNNER_PAGE * KG_RUNNER_PAGE];          \
	} name __attribute__((aligned(KG_RUNNER_PAGE)))

struct kg_rbackend *kg_rbackend_cpu(void);
/* The runner's open fds whose /proc/self/fd link starts with prefix ("/dev/nvidia", "socket:"). */
int kg_runner_fds_to(const char *prefix, int *fds, int max);
/* NULL when this build has no CUDA backend. */
struct kg_rbackend *kg_rbackend_cuda(void);

#endif

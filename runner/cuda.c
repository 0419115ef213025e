/* CUDA backend of the runner. libcuda (and the CUDA runtime the candidate links) are loaded with
 * dlopen and fully initialised before the seccomp filter: context, device arena, streams, events,
 * the L2 flush buffer. The device arena mirrors the shared one byte for byte, guard bands
 * included, so the parent's checks are the same as on the CPU. */
/* What is enforced here, and what is not, against a hostile process (it can call every driver
 * entry point itself, whatever is sealed on this side):
 * - sealed: the driver pointers, context, streams, events, flush buffer (a store faults);
 * - charged, by the parent's clock: all device work up to the device-wide sync inside RUN;
 * - named, best effort: the stream-done snapshot catches work that outlives the runner's own
 *   latency after kg_forward returns (~10 us); shorter escapes finish before it and pass, and a
 *   candidate that knows this code can write the snapshot itself. Closing that needs the given
 *   stream gated before the call (a wait the runner releases once fn has returned, with a device
 *   timeout so a candidate that synchronises inside kg_forward cannot deadlock): not done;
 * - undone: persisting-L2 set-aside and the stream's access-policy window (a candidate can set
 *   them again from a thread while a call runs; every persisting line is demoted before a flush);
 * - NOT enforced: read-only device inputs and unmapped guard ranges (CUDA VMM). The arena is one
 *   cuMemAlloc; guard bands are canaries checked after the call, and an input written and restored
 *   within one call is not seen. A VMM arena would need a device layout of its own (2 MiB
 *   granularity, tensor ends against unmapped ranges) and, since a candidate can cuMemSetAccess
 *   its own mappings back to read-write, the inputs' pages exported by a trusted process. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "runner/backend.h"

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;

#define CU_STREAM_NON_BLOCKING 0x1
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38
#define CU_LIMIT_PERSISTING_L2_CACHE_SIZE 0x06
#define CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW 1

/* cuda.h's CUaccessPolicyWindow inside its 64-byte attribute value union */
union cu_attr_value {
	struct {
		void *base_ptr;
		size_t num_bytes;
		float hit_ratio;
		int hit_prop, miss_prop;
	} window;
	char pad[64];
};

struct cu_api {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*ctx_synchronize)(void);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*memcpy_dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*memset_d32_async)(CUdeviceptr, unsigned, size_t, CUstream);
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_synchronize)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_synchronize)(CUevent);
	CUresult (*event_elapsed)(float *, CUevent, CUevent);
	CUresult (*device_attr)(int *, int, CUdevice);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*error_string)(CUresult, const char **);
	CUresult (*mem_free)(CUdeviceptr);
	/* optional (NULL where the driver lacks them): the persisting-L2 controls */
	CUresult (*ctx_get_limit)(size_t *, int);
	CUresult (*ctx_set_limit)(int, size_t);
	CUresult (*reset_persisting_l2)(void);
	CUresult (*stream_get_attr)(CUstream, int, union cu_attr_value *);
	CUresult (*stream_set_attr)(CUstream, int, const union cu_attr_value *);
};

struct cuda_state {
	struct cu_api cu;
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr arena_dev;
	unsigned char *arena_host;
	size_t arena_size;
	CUstream stream; /* the candidate's */
	CUstream copy; /* ours, non-blocking so it never waits behind the candidate's other work */
	CUevent ev0, ev1, ev2;
	CUdeviceptr flush;
	size_t flush_bytes;
	/* The outputs as they were when the candidate's stream reached the end of the call: copied on
	 * that stream right behind it, so the copy starts the moment the call's own work is done. */
	CUdeviceptr snap;
	size_t l2_limit0; /* the persisting-L2 set-aside the context started with (0) */
};

/* The backend, the driver's entry points, the context, streams, events and the flush buffer: one
 * sealed region (runner/backend.h), read-only before the candidate is loaded, so that it cannot
 * swap cuEventElapsedTime or the events the runner records. */
struct cuda_sealed {
	struct kg_rbackend b;
	struct cuda_state s;
};
static struct kg_rbackend cuda_backend;
KG_RUNNER_SEALED(struct cuda_sealed, sealed);
#define cs (sealed.v.s)
static unsigned flush_value; /* changes every flush: not sealed */

/* The tensors of the current SETUP and whether DOWNLOAD serves the outputs from the stream-done
 * snapshot. Not sealed (they change per layout and per call), so a candidate that knows this
 * code can rewrite them, or the snapshot itself (device memory of its own context): the
 * snapshot names the work that escaped the stream, the parent's clock is what charges it. */
static struct {
	int n, n_in;
	uint64_t off[KG_WIRE_MAX_TENSORS];
	size_t bytes[KG_WIRE_MAX_TENSORS];
} lay;
static int snap_valid;

/* Exact mode (a compute-sanitizer run): one allocation per tensor, sized to the byte, so that an
 * access past a tensor's end is past its allocation. The guard bands then stay host-side only. */
static struct exact_buf {
	uint64_t offset;
	size_t bytes;
	CUdeviceptr dev;
} xb[KG_WIRE_MAX_TENSORS];
static int n_xb;


static int cu_fail(CUresult rc, const char *what, char *err, size_t errsz)
{
	const char *s = NULL;
	if (cs.cu.error_string)
		cs.cu.error_string(rc, &s);
	snprintf(err, errsz, "%s: CUDA error %d (%s)", what, rc, s ? s : "unknown");
	return -EIO;
}

#define CU_CHECK(call, what)                                                                                         \
	do {                                                                                                         \
		CUresult rc_ = (call);                                                                               \
		if (rc_)                                                                                             \
			return cu_fail(rc_, what, err, errsz);                                                       \
	} while (0)

static int load_api(char *err, size_t errsz)
{
	cs.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!cs.lib) {
		snprintf(err, errsz, "no NVIDIA driver: %s", dlerror());
		return -ENOENT;
	}
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
		{"cuInit", offsetof(struct cu_api, init)},
		{"cuDeviceGet", offsetof(struct cu_api, device_get)},
		{"cuDevicePrimaryCtxRetain", offsetof(struct cu_api, primary_retain)},
		{"cuCtxSetCurrent", offsetof(struct cu_api, ctx_set_current)},
		{"cuCtxSynchronize", offsetof(struct cu_api, ctx_synchronize)},
		{"cuMemAlloc_v2", offsetof(struct cu_api, mem_alloc)},
		{"cuMemcpyHtoDAsync_v2", offsetof(struct cu_api, memcpy_htod_async)},
		{"cuMemcpyDtoHAsync_v2", offsetof(struct cu_api, memcpy_dtoh_async)},
		{"cuMemcpyDtoDAsync_v2", offsetof(struct cu_api, memcpy_dtod_async)},
		{"cuMemsetD32Async", offsetof(struct cu_api, memset_d32_async)},
		{"cuStreamCreate", offsetof(struct cu_api, stream_create)},
		{"cuStreamSynchronize", offsetof(struct cu_api, stream_synchronize)},
		{"cuEventCreate", offsetof(struct cu_api, event_create)},
		{"cuEventRecord", offsetof(struct cu_api, event_record)},
		{"cuEventSynchronize", offsetof(struct cu_api, event_synchronize)},
		{"cuEventElapsedTime", offsetof(struct cu_api, event_elapsed)},
		{"cuDeviceGetAttribute", offsetof(struct cu_api, device_attr)},
		{"cuMemHostRegister_v2", offsetof(struct cu_api, host_register)},
		{"cuGetErrorString", offsetof(struct cu_api, error_string)},
		{"cuMemFree_v2", offsetof(struct cu_api, mem_free)},
		{"cuCtxGetLimit", offsetof(struct cu_api, ctx_get_limit)},
		{"cuCtxSetLimit", offsetof(struct cu_api, ctx_set_limit)},
		{"cuCtxResetPersistingL2Cache", offsetof(struct cu_api, reset_persisting_l2)},
		{"cuStreamGetAttribute", offsetof(struct cu_api, stream_get_attr)},
		{"cuStreamSetAttribute", offsetof(struct cu_api, stream_set_attr)},
	};
	const size_t n_required = 20;
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *p = dlsym(cs.lib, syms[i].name);
		if (!p && i < n_required) {
			snprintf(err, errsz, "libcuda lacks %s", syms[i].name);
			return -ENOSYS;
		}
		memcpy((char *)&cs.cu + syms[i].off, &p, sizeof(p));
	}
	return 0;
}

/* The candidate links the shared CUDA runtime. Loading and initialising it here, before the
 * filter, binds it to the primary context we made current, and keeps its first-use setup (which
 * opens files and spawns threads) out of the filtered phase. */
static int init_cudart(char *err, size_t errsz)
{
	const char *path = getenv("KGATE_CUDART");
	void *h = dlopen(path && *path ? path : "libcudart.so", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		h = dlopen("libcudart.so.12", RTLD_NOW | RTLD_GLOBAL);
	if (!h) {
		snprintf(err, errsz, "cannot load the CUDA runtime: %s", dlerror());
		return -ENOENT;
	}
	int (*set_device)(int) = (int (*)(int))dlsym(h, "cudaSetDevice");
	int (*cuda_free)(void *) = (int (*)(void *))dlsym(h, "cudaFree");
	if (!set_device || !cuda_free) {
		snprintf(err, errsz, "the CUDA runtime lacks cudaSetDevice/cudaFree");
		return -ENOSYS;
	}
	int rc = set_device(0);
	if (!rc)
		rc = cuda_free(NULL);
	if (rc) {
		snprintf(err, errsz, "CUDA runtime initialisation failed: error %d", rc);
		return -EIO;
	}
	return 0;
}

/* The roofline's ceiling: a device-to-device copy of 512 MB, best of five, counting bytes read
 * plus written. Measured here, before the filter, in every CUDA runner; kgate believes the
 * trusted reference's runner only. */
static uint64_t measure_copy_mbps(void)
{
	const size_t n = 512u << 20;
	CUdeviceptr a = 0, b = 0;
	float best = 0;
	if (cs.cu.mem_alloc(&a, n) || cs.cu.mem_alloc(&b, n))
		goto out;
	cs.cu.memset_d32_async(a, 0x3f800000u, n / 4, cs.copy);
	for (int i = 0; i < 6; i++) {
		float ms = 0;
		if (cs.cu.event_record(cs.ev0, cs.copy) || cs.cu.memcpy_dtod_async(b, a, n, cs.copy) ||
		    cs.cu.event_record(cs.ev1, cs.copy) || cs.cu.event_synchronize(cs.ev1) ||
		    cs.cu.event_elapsed(&ms, cs.ev0, cs.ev1))
			goto out;
		if (i > 0 && ms > 0 && (float)(2.0 * (double)n / 1e6 / ms) > best)
			best = (float)(2.0 * (double)n / 1e6 / ms); /* MB per ms = GB/s; x1000 below */
	}
out:
	if (a)
		cs.cu.mem_free(a);
	if (b)
		cs.cu.mem_free(b);
	return (uint64_t)(best * 1000.0f);
}

static int cuda_init(struct kg_rbackend *b, void *arena, size_t arena_size, char *err, size_t errsz)
{
	int rc = load_api(err, errsz);
	if (rc)
		return rc;
	CU_CHECK(cs.cu.init(0), "cuInit");
	CU_CHECK(cs.cu.device_get(&cs.dev, 0), "cuDeviceGet");
	CU_CHECK(cs.cu.primary_retain(&cs.ctx, cs.dev), "cuDevicePrimaryCtxRetain");
	CU_CHECK(cs.cu.ctx_set_current(cs.ctx), "cuCtxSetCurrent");
	if ((rc = init_cudart(err, errsz)))
		return rc;
	cs.arena_host = arena;
	cs.arena_size = arena_size;
	if (!b->exact)
		CU_CHECK(cs.cu.mem_alloc(&cs.arena_dev, arena_size), "cuMemAlloc (arena)");
	/* Pinning the shared arena makes the copies DMA at full speed; failing that, pageable works. */
	cs.cu.host_register(arena, arena_size, 0);
	CU_CHECK(cs.cu.stream_create(&cs.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_CHECK(cs.cu.stream_create(&cs.copy, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_CHECK(cs.cu.event_create(&cs.ev0, 0), "cuEventCreate");
	CU_CHECK(cs.cu.event_create(&cs.ev1, 0), "cuEventCreate");
	CU_CHECK(cs.cu.event_create(&cs.ev2, 0), "cuEventCreate");
	if (!b->exact)
		CU_CHECK(cs.cu.mem_alloc(&cs.snap, arena_size), "cuMemAlloc (stream-done snapshot)");
	if (cs.cu.ctx_get_limit)
		cs.cu.ctx_get_limit(&cs.l2_limit0, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
	int l2 = 0;
	cs.cu.device_attr(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, cs.dev);
	cs.flush_bytes = (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
	CU_CHECK(cs.cu.mem_alloc(&cs.flush, cs.flush_bytes), "cuMemAlloc (L2 flush buffer)");
	b->ceiling_mbps = b->exact ? 0 : measure_copy_mbps(); /* nobody times an exact-mode run */
	b->state = &cs;
	return 0;
}

static int cuda_driver_fds(struct kg_rbackend *b, int *fds, int max)
{
	(void)b;
	return kg_runner_fds_to("/dev/nvidia", fds, max);
}

static size_t dtype_bytes(int32_t dt)
{
	switch (dt) {
	case KG_F16:
	case KG_BF16:
		return 2;
	case KG_I64:
		return 8;
	case KG_U8:
		return 1;
	default:
		return 4;
	}
}

static void exact_free(void)
{
	for (int i = 0; i < n_xb; i++)
		if (xb[i].dev)
			cs.cu.mem_free(xb[i].dev);
	n_xb = 0;
}

static int cuda_setup(struct kg_rbackend *b, const struct kg_wire_tensor *t, int n, int n_in, char *err,
		      size_t errsz)
{
	lay.n = 0;
	lay.n_in = n_in;
	snap_valid = 0;
	for (int i = 0; i < n; i++) {
		size_t bytes = dtype_bytes(t[i].dtype);
		for (int d = 0; d < t[i].ndim; d++)
			bytes *= (size_t)t[i].shape[d];
		if (t[i].offset > cs.arena_size || bytes > cs.arena_size - t[i].offset) {
			snprintf(err, errsz, "tensor %d lies outside the arena", i);
			return -EINVAL;
		}
		lay.off[i] = t[i].offset;
		lay.bytes[i] = bytes;
		lay.n = i + 1;
	}
	if (!b->exact)
		return 0;
	CU_CHECK(cs.cu.ctx_synchronize(), "synchronisation before re-allocating");
	exact_free();
	/* the layout above is checked against the arena: the exact buffers mirror it */
	for (int i = 0; i < n; i++) {
		size_t bytes = lay.bytes[i];
		xb[i].offset = lay.off[i];
		xb[i].bytes = bytes;
		xb[i].dev = 0;
		n_xb = i + 1;
		if (bytes)
			CU_CHECK(cs.cu.mem_alloc(&xb[i].dev, bytes), "cuMemAlloc (exact tensor buffer)");
	}
	return 0;
}

static void *cuda_ptr(struct kg_rbackend *b, uint64_t offset)
{
	if (!b->exact)
		return (void *)(uintptr_t)(cs.arena_dev + offset);
	for (int i = 0; i < n_xb; i++)
		if (xb[i].offset == offset)
			return (void *)(uintptr_t)xb[i].dev;
	return NULL;
}

static void *cuda_stream(struct kg_rbackend *b)
{
	(void)b;
	return cs.stream;
}

/* Copies between the shared arena and the device, on our own stream: the whole arena in use, or
 * in exact mode each tensor to and from its own allocation. */
static int copy_arena(const struct kg_rbackend *b, int to_device, size_t bytes, char *err, size_t errsz)
{
	const char *what = to_device ? "upload" : "download";
	int n = b->exact ? n_xb : 1;
	for (int i = 0; i < n; i++) {
		CUdeviceptr dev = b->exact ? xb[i].dev : cs.arena_dev;
		unsigned char *host = cs.arena_host + (b->exact ? xb[i].offset : 0);
		size_t len = b->exact ? xb[i].bytes : bytes;
		if (len)
			CU_CHECK(to_device ? cs.cu.memcpy_htod_async(dev, host, len, cs.copy)
					   : cs.cu.memcpy_dtoh_async(host, dev, len, cs.copy),
				 what);
	}
	CU_CHECK(cs.cu.stream_synchronize(cs.copy), to_device ? "upload (sync)" : "download (sync)");
	return 0;
}

static int cuda_upload(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz)
{
	snap_valid = 0;
	return copy_arena(b, 1, bytes, err, errsz);
}

/* DOWNLOAD after a snapshot: the arena from the live device copy, each output's bytes from the
 * snapshot taken when the call's stream was done (outputs come in offset order, after the
 * inputs). What work on other streams wrote later shows only in SETTLE's live copy. */
static int download_snapshot(size_t bytes, char *err, size_t errsz)
{
	uint64_t cur = 0;
	for (int i = lay.n_in; i < lay.n; i++) {
		uint64_t lo = lay.off[i], hi = lay.off[i] + lay.bytes[i];
		if (lo < cur || hi > bytes)
			return copy_arena(&sealed.v.b, 0, bytes, err, errsz);
		if (lo > cur)
			CU_CHECK(cs.cu.memcpy_dtoh_async(cs.arena_host + cur, cs.arena_dev + cur, lo - cur, cs.copy),
				 "download");
		if (hi > lo)
			CU_CHECK(cs.cu.memcpy_dtoh_async(cs.arena_host + lo, cs.snap + lo, hi - lo, cs.copy),
				 "download (stream-done snapshot)");
		cur = hi;
	}
	if (bytes > cur)
		CU_CHECK(cs.cu.memcpy_dtoh_async(cs.arena_host + cur, cs.arena_dev + cur, bytes - cur, cs.copy),
			 "download");
	CU_CHECK(cs.cu.stream_synchronize(cs.copy), "download (sync)");
	return 0;
}

static int cuda_flush(struct kg_rbackend *b, uint64_t *bytes, char *err, size_t errsz)
{
	(void)b;
	/* Persisting lines survive a flush of normal stores: demote them all first, whatever the
	 * candidate set aside or windowed since the last call. */
	if (cs.cu.reset_persisting_l2)
		cs.cu.reset_persisting_l2();
	/* A different value each time, so no cache or compression shortcut can keep old lines. */
	flush_value = flush_value * 1664525u + 1013904223u;
	CU_CHECK(cs.cu.memset_d32_async(cs.flush, flush_value, cs.flush_bytes / 4, cs.stream), "L2 flush");
	CU_CHECK(cs.cu.stream_synchronize(cs.stream), "L2 flush (sync)");
	*bytes = cs.flush_bytes;
	return 0;
}

/* What the candidate changed in the L2's persisting controls, undone: a set-aside (the limit) or
 * an access-policy window left on the given stream would keep its data in L2 across the flush.
 * A window set per launch or on another stream needs the set-aside too, and every persisting
 * line is demoted before each flush (cuda_flush). */
static uint32_t undo_l2(void)
{
	uint32_t flags = 0;
	size_t lim = 0;
	if (cs.cu.ctx_get_limit && !cs.cu.ctx_get_limit(&lim, CU_LIMIT_PERSISTING_L2_CACHE_SIZE) &&
	    lim != cs.l2_limit0) {
		flags |= KG_RUN_L2_LIMIT;
		if (cs.cu.ctx_set_limit)
			cs.cu.ctx_set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, cs.l2_limit0);
	}
	union cu_attr_value av;
	memset(&av, 0, sizeof(av));
	if (cs.cu.stream_get_attr && !cs.cu.stream_get_attr(cs.stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &av) &&
	    av.window.num_bytes) {
		flags |= KG_RUN_L2_WINDOW;
		memset(&av, 0, sizeof(av));
		if (cs.cu.stream_set_attr)
			cs.cu.stream_set_attr(cs.stream, CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW, &av);
	}
	if (flags && cs.cu.reset_persisting_l2)
		cs.cu.reset_persisting_l2();
	return flags;
}

/* One call: ev0, the candidate, ev1, then on the same stream a copy of every output into the
 * snapshot buffer and ev2. Then a device-wide synchronisation before the reply, so that the
 * parent's round trip of RUN holds every bit of work the call caused, on any stream, graph or
 * the legacy default stream: the parent charges it (verifier/timing.c), whatever the events say.
 * The snapshot is what a caller ordering on the given stream would have read; DOWNLOAD serves it
 * and SETTLE the live outputs, and the parent names any difference check.async_escape. */
static int cuda_run(struct kg_rbackend *b, void (*fn)(void *), void *arg, struct kg_wire_reply *r, char *err,
		    size_t errsz)
{
	snap_valid = 0;
	CU_CHECK(cs.cu.event_record(cs.ev0, cs.stream), "cuEventRecord");
	fn(arg);
	CU_CHECK(cs.cu.event_record(cs.ev1, cs.stream), "cuEventRecord (after kg_forward)");
	int snap = !b->exact && cs.snap && lay.n > lay.n_in;
	for (int i = lay.n_in; snap && i < lay.n; i++)
		if (lay.bytes[i])
			CU_CHECK(cs.cu.memcpy_dtod_async(cs.snap + lay.off[i], cs.arena_dev + lay.off[i], lay.bytes[i],
							 cs.stream),
				 "the stream-done snapshot of the outputs");
	CU_CHECK(cs.cu.event_record(cs.ev2, cs.stream), "cuEventRecord (after the snapshot)");
	CU_CHECK(cs.cu.event_synchronize(cs.ev2), "the candidate's kernel");
	float ms = 0, snap_ms = 0;
	CU_CHECK(cs.cu.event_elapsed(&ms, cs.ev0, cs.ev1), "cuEventElapsedTime");
	CU_CHECK(cs.cu.event_elapsed(&snap_ms, cs.ev1, cs.ev2), "cuEventElapsedTime (snapshot)");
	r->elapsed_ns = (uint64_t)((double)ms * 1e6);
	r->snap_ns = (uint64_t)((double)snap_ms * 1e6);
	/* Work the candidate put on other streams keeps the device busy past ev2. */
	uint64_t t0 = kg_now_ns();
	CU_CHECK(cs.cu.ctx_synchronize(), "device-wide synchronisation after kg_forward");
	r->info = kg_now_ns() - t0;
	r->flags = undo_l2();
	snap_valid = snap;
	return 0;
}

static int cuda_download(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz)
{
	if (snap_valid && !b->exact)
		return download_snapshot(bytes, err, errsz);
	return copy_arena(b, 0, bytes, err, errsz);
}

static int cuda_settle(struct kg_rbackend *b, uint32_t delay_ms, size_t bytes, char *err, size_t errsz)
{
	uint64_t t0 = kg_now_ns();
	snap_valid = 0; /* the live outputs now: what the call's stream delivered came with DOWNLOAD */
	CU_CHECK(cs.cu.ctx_synchronize(), "device-wide synchronisation");
	uint64_t waited = (kg_now_ns() - t0) / 1000000u;
	if (waited < delay_ms) {
		struct timespec ts = {.tv_sec = (delay_ms - waited) / 1000,
				      .tv_nsec = (long)((delay_ms - waited) % 1000) * 1000000L};
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	return cuda_download(b, bytes, err, errsz);
}

static struct kg_rbackend cuda_backend = {
	.name = "cuda",
	.device = 1,
	.init = cuda_init,
	.driver_fds = cuda_driver_fds,
	.setup = cuda_setup,
	.ptr = cuda_ptr,
	.stream = cuda_stream,
	.upload = cuda_upload,
	.flush = cuda_flush,
	.run = cuda_run,
	.download = cuda_download,
	.settle = cuda_settle,
};

struct kg_rbackend *kg_rbackend_cuda(void)
{
	if (!sealed.v.b.name) {
		sealed.v.b = cuda_backend;
		sealed.v.b.sealed = &sealed;
		sealed.v.b.sealed_len = sizeof(sealed);
	}
	return &sealed.v.b;
}

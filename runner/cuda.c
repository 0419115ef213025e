/* CUDA backend of the runner. libcuda (and the CUDA runtime the candidate links) are loaded with
 * dlopen and fully initialised before the seccomp filter: context, streams, events.
 * Two ways to hold the tensors:
 * - imported (every verified or timed run): the device arena is an allocation of kgate-device,
 *   the trusted process that owns the run's device memory (device/keeper.c), imported here from
 *   the fd it exported (CUDA VMM). That process writes the inputs, flushes the L2, snapshots the
 *   outputs and keeps the clock; this backend only calls the candidate, on the given stream, and
 *   waits for the device. Nothing it says reaches a verdict but as a claim.
 * - exact (a compute-sanitizer run, never timed): one allocation per tensor, sized to the byte,
 *   copied from and to the shared host arena here, so that the tool sees every buffer's bounds.
 * With a gate page (--gate, device/wire.h), a call's ends are marked on the device: the stream
 * waits for kgate-device's release of each set before its work and marks the set done after it,
 * and kgate-device snapshots each set's outputs at that mark, whatever this process does after. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "kg_cudrv.h"
#include "device/wire.h" /* the gate page's words, kgate-device's and this runner's */
#include "runner/backend.h"


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
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_synchronize)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_synchronize)(CUevent);
	CUresult (*event_elapsed)(float *, CUevent, CUevent);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*error_string)(CUresult, const char **);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*mem_import)(CUmemGenericAllocationHandle *, void *, int);
	CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*set_access)(CUdeviceptr, size_t, const struct kg_cu_access_desc *, size_t);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	/* optional (NULL where the driver lacks them): the persisting-L2 controls */
	CUresult (*ctx_get_limit)(size_t *, int);
	CUresult (*ctx_set_limit)(int, size_t);
	CUresult (*reset_persisting_l2)(void);
	CUresult (*stream_get_attr)(CUstream, int, union cu_attr_value *);
	CUresult (*stream_set_attr)(CUstream, int, const union cu_attr_value *);
	/* a gated call's marks (--gate) */
	CUresult (*wait_value32)(CUstream, CUdeviceptr, unsigned, unsigned);
	CUresult (*write_value32)(CUstream, CUdeviceptr, unsigned, unsigned);
	CUresult (*host_device_ptr)(CUdeviceptr *, void *, unsigned);
};

struct cuda_state {
	struct cu_api cu;
	void *lib;
	CUdevice dev;
	CUcontext ctx;
	CUdeviceptr arena_dev; /* imported: the keeper's allocation, mapped here */
	size_t arena_size;
	unsigned char *arena_host; /* exact: the shared host arena the tensors are copied from and to */
	CUstream stream; /* the candidate's */
	CUstream copy; /* ours, non-blocking so it never waits behind the candidate's other work */
	CUevent ev0, ev1;
	size_t l2_limit0; /* the persisting-L2 set-aside the context started with (0) */
	volatile uint32_t *gate_host; /* the gate page (--gate), mapped here; NULL when none */
	CUdeviceptr gate_dev; /* the same page as the device reads it */
};

/* The backend, the driver's entry points, the context, streams and events: one sealed region
 * (runner/backend.h), read-only before the candidate is loaded. Sealing keeps an honest runner
 * honest against a stray store; a hostile candidate can still call the driver itself, which is why
 * nothing here is more than a claim: the keeper holds the data and the clock. */
struct cuda_sealed {
	struct kg_rbackend b;
	struct cuda_state s;
};
static struct kg_rbackend cuda_backend;
KG_RUNNER_SEALED(struct cuda_sealed, sealed);
#define cs (sealed.v.s)

/* Exact mode (a compute-sanitizer run): one allocation per tensor, sized to the byte, so that an
 * access past a tensor's end is past its allocation. The guard bands then stay host-side only. */
static struct exact_buf {
	uint64_t offset;
	size_t bytes;
	CUdeviceptr dev;
} *xb; /* as many as SETUP's table has */
static int n_xb, cap_xb;

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
	static const struct kg_cu_sym syms[] = {
		{"cuInit", offsetof(struct cu_api, init)},
		{"cuDeviceGet", offsetof(struct cu_api, device_get)},
		{"cuDevicePrimaryCtxRetain", offsetof(struct cu_api, primary_retain)},
		{"cuCtxSetCurrent", offsetof(struct cu_api, ctx_set_current)},
		{"cuCtxSynchronize", offsetof(struct cu_api, ctx_synchronize)},
		{"cuMemAlloc_v2", offsetof(struct cu_api, mem_alloc)},
		{"cuMemcpyHtoDAsync_v2", offsetof(struct cu_api, memcpy_htod_async)},
		{"cuMemcpyDtoHAsync_v2", offsetof(struct cu_api, memcpy_dtoh_async)},
		{"cuStreamCreate", offsetof(struct cu_api, stream_create)},
		{"cuStreamSynchronize", offsetof(struct cu_api, stream_synchronize)},
		{"cuEventCreate", offsetof(struct cu_api, event_create)},
		{"cuEventRecord", offsetof(struct cu_api, event_record)},
		{"cuEventSynchronize", offsetof(struct cu_api, event_synchronize)},
		{"cuEventElapsedTime", offsetof(struct cu_api, event_elapsed)},
		{"cuMemHostRegister_v2", offsetof(struct cu_api, host_register)},
		{"cuGetErrorString", offsetof(struct cu_api, error_string)},
		{"cuMemFree_v2", offsetof(struct cu_api, mem_free)},
		{"cuMemImportFromShareableHandle", offsetof(struct cu_api, mem_import)},
		{"cuMemAddressReserve", offsetof(struct cu_api, address_reserve)},
		{"cuMemMap", offsetof(struct cu_api, mem_map)},
		{"cuMemSetAccess", offsetof(struct cu_api, set_access)},
		{"cuMemRelease", offsetof(struct cu_api, mem_release)},
		{"cuCtxGetLimit", offsetof(struct cu_api, ctx_get_limit)},
		{"cuCtxSetLimit", offsetof(struct cu_api, ctx_set_limit)},
		{"cuCtxResetPersistingL2Cache", offsetof(struct cu_api, reset_persisting_l2)},
		{"cuStreamGetAttribute", offsetof(struct cu_api, stream_get_attr)},
		{"cuStreamSetAttribute", offsetof(struct cu_api, stream_set_attr)},
		{"cuStreamWaitValue32_v2", offsetof(struct cu_api, wait_value32)},
		{"cuStreamWriteValue32_v2", offsetof(struct cu_api, write_value32)},
		{"cuMemHostGetDevicePointer_v2", offsetof(struct cu_api, host_device_ptr)},
	};
	const size_t n_required = 22;
	const char *missing = kg_cu_resolve(cs.lib, syms, sizeof(syms) / sizeof(syms[0]), n_required, &cs.cu);
	if (missing) {
		snprintf(err, errsz, "libcuda lacks %s", missing);
		return -ENOSYS;
	}
	if (!cs.cu.wait_value32)
		*(void **)&cs.cu.wait_value32 = dlsym(cs.lib, "cuStreamWaitValue32");
	if (!cs.cu.write_value32)
		*(void **)&cs.cu.write_value32 = dlsym(cs.lib, "cuStreamWriteValue32");
	return 0;
}

/* The gate page kgate made (fd 5), mapped and registered for the device, the fd closed. */
static int map_gate(struct kg_rbackend *b, char *err, size_t errsz)
{
	if (!cs.cu.wait_value32 || !cs.cu.write_value32 || !cs.cu.host_device_ptr) {
		snprintf(err, errsz, "a gate page, and libcuda lacks the stream memory operations");
		return -ENOSYS;
	}
	void *p = mmap(NULL, KG_DEV_GATE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, b->gate_fd, 0);
	close(b->gate_fd);
	b->gate_fd = -1;
	if (p == MAP_FAILED) {
		snprintf(err, errsz, "mapping the gate page: %s", strerror(errno));
		return -EIO;
	}
	CU_CHECK(cs.cu.host_register(p, KG_DEV_GATE_BYTES, CU_MEMHOSTREGISTER_DEVICEMAP), "cuMemHostRegister (the gate page)");
	CU_CHECK(cs.cu.host_device_ptr(&cs.gate_dev, p, 0), "cuMemHostGetDevicePointer (the gate page)");
	cs.gate_host = p;
	return 0;
}

/* The candidate links the shared CUDA runtime. Loading and initialising it here, before the
 * filter, binds it to the primary context we made current, and keeps its first-use setup (which
 * opens files and spawns threads) out of the filtered phase. The driver's PTX JIT compiler is
 * loaded too: a library kernel without code for this GPU (cuBLAS at some shapes) is compiled on
 * first launch, and the compiler's own code could not be mapped once the runner is sealed. */
static int init_cudart(char *err, size_t errsz)
{
	dlopen("libnvidia-ptxjitcompiler.so.1", RTLD_NOW | RTLD_GLOBAL); /* absent on some drivers */
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

/* The keeper's device arena: imported from the fd it exported, mapped read-write at an address
 * of our own, the fd closed (one import, not a second later). */
static int import_arena(struct kg_rbackend *b, char *err, size_t errsz)
{
	CUmemGenericAllocationHandle h = 0;
	CU_CHECK(cs.cu.mem_import(&h, (void *)(uintptr_t)b->device_fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
		 "cuMemImportFromShareableHandle (the keeper's device arena)");
	CU_CHECK(cs.cu.address_reserve(&cs.arena_dev, b->device_bytes, 0, 0, 0), "cuMemAddressReserve");
	CU_CHECK(cs.cu.mem_map(cs.arena_dev, b->device_bytes, 0, h, 0), "cuMemMap (the keeper's device arena)");
	struct kg_cu_access_desc d = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = cs.dev},
				      .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CU_CHECK(cs.cu.set_access(cs.arena_dev, b->device_bytes, &d, 1), "cuMemSetAccess");
	cs.cu.mem_release(h); /* the mapping holds it */
	close(b->device_fd);
	b->device_fd = -1;
	cs.arena_size = b->device_bytes;
	return 0;
}

static int cuda_init(struct kg_rbackend *b, void *arena, size_t arena_size, char *err, size_t errsz)
{
	if (!b->exact && b->device_fd < 0) {
		snprintf(err, errsz, "no device arena: the CUDA runner needs kgate-device's (--device-arena)");
		return -EINVAL;
	}
	int rc = load_api(err, errsz);
	if (rc)
		return rc;
	CU_CHECK(cs.cu.init(0), "cuInit");
	CU_CHECK(cs.cu.device_get(&cs.dev, 0), "cuDeviceGet");
	CU_CHECK(cs.cu.primary_retain(&cs.ctx, cs.dev), "cuDevicePrimaryCtxRetain");
	CU_CHECK(cs.cu.ctx_set_current(cs.ctx), "cuCtxSetCurrent");
	if ((rc = init_cudart(err, errsz)))
		return rc;
	if (b->exact) {
		cs.arena_host = arena;
		cs.arena_size = arena_size;
		/* pinning the shared arena makes the copies DMA at full speed; failing that, pageable */
		cs.cu.host_register(arena, arena_size, 0);
	} else if ((rc = import_arena(b, err, errsz))) {
		return rc;
	}
	/* a page it cannot map leaves the runner ungated (HELLO says so), not broken */
	char gerr[200];
	b->gate_ok = b->gate_fd >= 0 && !map_gate(b, gerr, sizeof(gerr));
	CU_CHECK(cs.cu.stream_create(&cs.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_CHECK(cs.cu.stream_create(&cs.copy, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_CHECK(cs.cu.event_create(&cs.ev0, 0), "cuEventCreate");
	CU_CHECK(cs.cu.event_create(&cs.ev1, 0), "cuEventCreate");
	if (cs.cu.ctx_get_limit)
		cs.cu.ctx_get_limit(&cs.l2_limit0, CU_LIMIT_PERSISTING_L2_CACHE_SIZE);
	b->ceiling_mbps = 0; /* the keeper measures the device, where nothing untrusted runs */
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
	case KG_BOOL:
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
	(void)n_in;
	/* the table was checked against the arena's size already (kg_wire_table_get) */
	for (int i = 0; i < n; i++) {
		size_t bytes = dtype_bytes(t[i].dtype);
		for (int d = 0; d < t[i].ndim; d++)
			bytes *= (size_t)t[i].shape[d];
		if (t[i].offset > cs.arena_size || bytes > cs.arena_size - t[i].offset) {
			snprintf(err, errsz, "tensor %d lies outside the arena", i);
			return -EINVAL;
		}
	}
	if (!b->exact)
		return 0;
	CU_CHECK(cs.cu.ctx_synchronize(), "synchronisation before re-allocating");
	exact_free();
	if (n > cap_xb) {
		struct exact_buf *nx = realloc(xb, (size_t)n * sizeof(*nx));
		if (!nx) {
			snprintf(err, errsz, "no memory for %d exact buffers", n);
			return -ENOMEM;
		}
		xb = nx;
		cap_xb = n;
	}
	for (int i = 0; i < n; i++) {
		size_t bytes = dtype_bytes(t[i].dtype);
		for (int d = 0; d < t[i].ndim; d++)
			bytes *= (size_t)t[i].shape[d];
		xb[i].offset = t[i].offset;
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

/* Exact mode's copies between the shared host arena and each tensor's own allocation. */
static int copy_exact(int to_device, char *err, size_t errsz)
{
	const char *what = to_device ? "upload" : "download";
	for (int i = 0; i < n_xb; i++)
		if (xb[i].bytes)
			CU_CHECK(to_device ? cs.cu.memcpy_htod_async(xb[i].dev, cs.arena_host + xb[i].offset, xb[i].bytes,
								     cs.copy)
					   : cs.cu.memcpy_dtoh_async(cs.arena_host + xb[i].offset, xb[i].dev, xb[i].bytes,
								     cs.copy),
				 what);
	CU_CHECK(cs.cu.stream_synchronize(cs.copy), to_device ? "upload (sync)" : "download (sync)");
	return 0;
}

static int keeper_does_it(const struct kg_rbackend *b, const char *what, char *err, size_t errsz)
{
	(void)b;
	snprintf(err, errsz, "%s is kgate-device's, not the runner's (an imported device arena)", what);
	return -EINVAL;
}

static int cuda_upload(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz)
{
	(void)bytes;
	return b->exact ? copy_exact(1, err, errsz) : keeper_does_it(b, "UPLOAD", err, errsz);
}

/* What the candidate changed in the L2's persisting controls, undone as a courtesy to the next
 * call (the keeper undoes them again before its flush, and that is what counts). */
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

/* ev0 is recorded again after the first set's wait: the runner's claim starts at the release */
static int claim_from_release;

static int cuda_gate_wait(struct kg_rbackend *b, uint32_t tok, int first)
{
	(void)b;
	if (cs.cu.wait_value32(cs.stream, cs.gate_dev + KG_DEV_GATE_RELEASED, tok, CU_STREAM_WAIT_VALUE_GEQ))
		return -1;
	if (first && claim_from_release && cs.cu.event_record(cs.ev0, cs.stream))
		return -1;
	return 0;
}

static void cuda_gate_arm(struct kg_rbackend *b, uint32_t tok)
{
	(void)b;
	__atomic_store_n(cs.gate_host + KG_DEV_GATE_ARMED / 4, tok, __ATOMIC_RELEASE);
}

static int cuda_gate_done(struct kg_rbackend *b, uint32_t tok)
{
	(void)b;
	return cs.cu.write_value32(cs.stream, cs.gate_dev + KG_DEV_GATE_DONE, tok, CU_STREAM_WRITE_VALUE_DEFAULT) ? -1 : 0;
}

/* One call: ev0, the candidate, ev1 on the given stream, then a device-wide synchronisation
 * before the reply. The events are the runner's claim; what is charged is the keeper's span, from
 * the inputs on the device to its snapshot of the outputs, taken once this process is stopped. */
static int cuda_run(struct kg_rbackend *b, void (*fn)(void *), void *arg, struct kg_wire_reply *r, char *err,
		    size_t errsz)
{
	(void)b;
	CU_CHECK(cs.cu.event_record(cs.ev0, cs.stream), "cuEventRecord");
	claim_from_release = 1;
	fn(arg);
	claim_from_release = 0;
	CU_CHECK(cs.cu.event_record(cs.ev1, cs.stream), "cuEventRecord (after kg_forward)");
	CU_CHECK(cs.cu.event_synchronize(cs.ev1), "the candidate's kernel");
	float ms = 0;
	CU_CHECK(cs.cu.event_elapsed(&ms, cs.ev0, cs.ev1), "cuEventElapsedTime");
	r->elapsed_ns = (uint64_t)((double)ms * 1e6);
	/* Work the candidate put on other streams keeps the device busy past ev1. */
	uint64_t t0 = kg_now_ns();
	CU_CHECK(cs.cu.ctx_synchronize(), "device-wide synchronisation after kg_forward");
	r->info = kg_now_ns() - t0;
	r->snap_ns = 0;
	r->flags = undo_l2();
	return 0;
}

static int cuda_download(struct kg_rbackend *b, size_t bytes, char *err, size_t errsz)
{
	(void)bytes;
	return b->exact ? copy_exact(0, err, errsz) : keeper_does_it(b, "DOWNLOAD", err, errsz);
}

static int cuda_settle(struct kg_rbackend *b, uint32_t delay_ms, size_t bytes, char *err, size_t errsz)
{
	if (!b->exact)
		return keeper_does_it(b, "SETTLE", err, errsz);
	uint64_t t0 = kg_now_ns();
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
	.device_fd = -1,
	.init = cuda_init,
	.driver_fds = cuda_driver_fds,
	.setup = cuda_setup,
	.ptr = cuda_ptr,
	.stream = cuda_stream,
	.upload = cuda_upload,
	.run = cuda_run,
	.download = cuda_download,
	.settle = cuda_settle,
	.gate_fd = -1,
	.gate_wait = cuda_gate_wait,
	.gate_arm = cuda_gate_arm,
	.gate_done = cuda_gate_done,
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

/* kgate-device: the trusted process that owns the GPU's memory for a run. kgate starts it beside
 * the runners; no candidate code is ever loaded here. For each runner it creates the device mirror
 * of that runner's host arena as one exportable allocation (CUDA VMM, a POSIX fd the runner
 * imports) and a private buffer it never exports. It stages every call's inputs there (drawn by
 * its own kernels, device/kernels.cu, or copied), starts the clock, copies them onto the mirror and
 * flushes the L2; at the call's end it snapshots the outputs into the private buffer and stops the
 * clock. Then it compares the candidate's inputs with the staged copy, judges the outputs there
 * against the reference's (CHECK) and sends the host arena only what kgate reads: no input, output
 * or time reaches kgate through the candidate's process. A candidate can re-map what it imported
 * read-write (measured on an H200: the importer's cuMemSetAccess wins), so the mirror is the
 * candidate's to scribble on; what kgate judges by is the private buffer and the host arena, which
 * no runner maps. */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "kg_common.h"
#include "kg_cudrv.h"
#include "device/judge.h"
#include "device/stage.h"
#include "device/wire.h"

struct cu_api {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*memcpy_htod_async)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*memcpy_dtoh_async)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*memcpy_dtod_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*memset_d32_async)(CUdeviceptr, unsigned, size_t, CUstream);
	CUresult (*memset_d16_async)(CUdeviceptr, unsigned short, size_t, CUstream);
	CUresult (*memset_d8_async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*memset_d2d32_async)(CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream);
	CUresult (*stream_create)(CUstream *, unsigned);
	CUresult (*stream_synchronize)(CUstream);
	CUresult (*event_create)(CUevent *, unsigned);
	CUresult (*event_record)(CUevent, CUstream);
	CUresult (*event_elapsed)(float *, CUevent, CUevent);
	CUresult (*device_attr)(int *, int, CUdevice);
	CUresult (*host_register)(void *, size_t, unsigned);
	CUresult (*error_string)(CUresult, const char **);
	CUresult (*granularity)(size_t *, const struct kg_cu_alloc_prop *, int);
	CUresult (*mem_create)(CUmemGenericAllocationHandle *, size_t, const struct kg_cu_alloc_prop *,
			       unsigned long long);
	CUresult (*mem_export)(void *, CUmemGenericAllocationHandle, int, unsigned long long);
	CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
	CUresult (*mem_map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
	CUresult (*set_access)(CUdeviceptr, size_t, const struct kg_cu_access_desc *, size_t);
	/* optional: the persisting-L2 controls */
	CUresult (*ctx_set_limit)(int, size_t);
	CUresult (*reset_persisting_l2)(void);
	/* optional: the keeper's own kernels */
	CUresult (*module_load_data)(void **, const void *);
	CUresult (*module_get_function)(void **, void *, const char *);
	CUresult (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
				  void **, void **);
	CUresult (*total_mem)(size_t *, CUdevice); /* optional */
};

/* device/kernels.cu as nvcc built it (device/fatbin.S); empty without nvcc */
extern const unsigned char kg_device_fatbin[];
extern const uint64_t kg_device_fatbin_size;

/* kernels.cu's kernel arguments, laid out as there */
struct kg_gen_args {
	struct kg_gen_tensor t;
	uint32_t key[8];
	CUdeviceptr z;
	CUdeviceptr dst;
	unsigned long long stride;
};

struct kg_judge_args {
	struct kg_dev_check c;
	CUdeviceptr got, exp, part;
	unsigned long long len, rows, per;
	int factor;
};

#define JUDGE_THREADS 128 /* kernels.cu's */
#define JUDGE_MAX_PARTS 65536u /* partial results a check gives (rows grouped to fit) */
#define JUDGE_CHUNK 16384u /* elements a block takes where there are no rows to fit */

struct slot {
	int used;
	unsigned char *host; /* the host arena, shared with kgate (no runner maps it) */
	size_t host_bytes;
	CUdeviceptr mirror; /* exported: the runner's */
	/* never exported: the call's inputs staged before its clock starts, then the outputs' snapshot */
	CUdeviceptr priv;
	size_t dev_bytes;
	/* what the last START staged in priv: [0, staged), less [snap_lo, snap_hi) once END has
	 * written the outputs' snapshot over it (snap_ok: and that copy completed) */
	uint64_t staged, snap_lo, snap_hi;
	int snap_ok;
	/* the call's device clock: recorded on the keeper's stream as START's copy onto the mirror
	 * begins (go, once went) and as END's snapshot completes (got) */
	CUevent go, got;
	int went;
	/* the last START's sets of `stride` bytes (1: an ordinary call), and how many of them END's
	 * snapshot holds (0: none yet) */
	uint32_t sets, snap_sets;
	uint64_t stride;
};

static struct {
	struct cu_api cu;
	CUdevice dev;
	CUcontext ctx;
	CUstream stream;
	CUevent ev0, ev1;
	CUdeviceptr flush;
	size_t flush_bytes;
	unsigned flush_value;
	size_t gran;
	struct slot slot[KG_DEV_MAX_SLOTS];
	/* the kernels (caps: KG_DEV_CAP_*), the generator's tables on the device, a word for
	 * kg_first_diff's answer */
	uint32_t caps;
	void *module, *gen_fill, *first_diff, *judge, *copy_sets, *copy_sets_b;
	CUdeviceptr zig, diff_word, parts;
	struct kg_dev_cmp *parts_host;
	int sms;
} k;

static int cu_fail(CUresult rc, const char *what, struct kg_dev_reply *r)
{
	const char *s = NULL;
	if (k.cu.error_string)
		k.cu.error_string(rc, &s);
	snprintf(r->msg, sizeof(r->msg), "%s: CUDA error %d (%s)", what, rc, s ? s : "unknown");
	r->status = -EIO;
	return -EIO;
}

#define CU_OK(call, what)                                                                                            \
	do {                                                                                                         \
		CUresult rc_ = (call);                                                                               \
		if (rc_)                                                                                             \
			return cu_fail(rc_, what, r);                                                                \
	} while (0)

static int load_api(struct kg_dev_reply *r)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(r->msg, sizeof(r->msg), "no NVIDIA driver: %s", dlerror());
		r->status = -ENOENT;
		return -ENOENT;
	}
	static const struct kg_cu_sym syms[] = {
		{"cuInit", offsetof(struct cu_api, init)},
		{"cuDeviceGet", offsetof(struct cu_api, device_get)},
		{"cuDevicePrimaryCtxRetain", offsetof(struct cu_api, primary_retain)},
		{"cuCtxSetCurrent", offsetof(struct cu_api, ctx_set_current)},
		{"cuMemAlloc_v2", offsetof(struct cu_api, mem_alloc)},
		{"cuMemFree_v2", offsetof(struct cu_api, mem_free)},
		{"cuMemcpyHtoDAsync_v2", offsetof(struct cu_api, memcpy_htod_async)},
		{"cuMemcpyDtoHAsync_v2", offsetof(struct cu_api, memcpy_dtoh_async)},
		{"cuMemcpyDtoDAsync_v2", offsetof(struct cu_api, memcpy_dtod_async)},
		{"cuMemsetD32Async", offsetof(struct cu_api, memset_d32_async)},
		{"cuMemsetD16Async", offsetof(struct cu_api, memset_d16_async)},
		{"cuMemsetD8Async", offsetof(struct cu_api, memset_d8_async)},
		{"cuMemsetD2D32Async", offsetof(struct cu_api, memset_d2d32_async)},
		{"cuStreamCreate", offsetof(struct cu_api, stream_create)},
		{"cuStreamSynchronize", offsetof(struct cu_api, stream_synchronize)},
		{"cuEventCreate", offsetof(struct cu_api, event_create)},
		{"cuEventRecord", offsetof(struct cu_api, event_record)},
		{"cuEventElapsedTime", offsetof(struct cu_api, event_elapsed)},
		{"cuDeviceGetAttribute", offsetof(struct cu_api, device_attr)},
		{"cuMemHostRegister_v2", offsetof(struct cu_api, host_register)},
		{"cuGetErrorString", offsetof(struct cu_api, error_string)},
		{"cuMemGetAllocationGranularity", offsetof(struct cu_api, granularity)},
		{"cuMemCreate", offsetof(struct cu_api, mem_create)},
		{"cuMemExportToShareableHandle", offsetof(struct cu_api, mem_export)},
		{"cuMemAddressReserve", offsetof(struct cu_api, address_reserve)},
		{"cuMemMap", offsetof(struct cu_api, mem_map)},
		{"cuMemSetAccess", offsetof(struct cu_api, set_access)},
		{"cuCtxSetLimit", offsetof(struct cu_api, ctx_set_limit)},
		{"cuCtxResetPersistingL2Cache", offsetof(struct cu_api, reset_persisting_l2)},
		{"cuModuleLoadData", offsetof(struct cu_api, module_load_data)},
		{"cuModuleGetFunction", offsetof(struct cu_api, module_get_function)},
		{"cuLaunchKernel", offsetof(struct cu_api, launch_kernel)},
		{"cuDeviceTotalMem_v2", offsetof(struct cu_api, total_mem)},
	};
	const size_t n_required = 27;
	const char *missing = kg_cu_resolve(lib, syms, sizeof(syms) / sizeof(syms[0]), n_required, &k.cu);
	if (missing) {
		snprintf(r->msg, sizeof(r->msg), "libcuda lacks %s", missing);
		r->status = -ENOSYS;
		return -ENOSYS;
	}
	return 0;
}

static struct kg_cu_alloc_prop vmm_prop(void)
{
	struct kg_cu_alloc_prop p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.requested_handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = k.dev;
	return p;
}

/* The ceiling kgate's roofline check believes: a device-to-device copy of 512 MB, best of five,
 * bytes read plus written, measured here where nothing untrusted runs. */
static uint64_t measure_copy_mbps(void)
{
	const size_t n = 512u << 20;
	CUdeviceptr a = 0, b = 0;
	float best = 0;
	if (k.cu.mem_alloc(&a, n) || k.cu.mem_alloc(&b, n))
		goto out;
	k.cu.memset_d32_async(a, 0x3f800000u, n / 4, k.stream);
	for (int i = 0; i < 6; i++) {
		float ms = 0;
		if (k.cu.event_record(k.ev0, k.stream) || k.cu.memcpy_dtod_async(b, a, n, k.stream) ||
		    k.cu.event_record(k.ev1, k.stream) || k.cu.stream_synchronize(k.stream) ||
		    k.cu.event_elapsed(&ms, k.ev0, k.ev1))
			goto out;
		if (i > 0 && ms > 0 && (float)(2.0 * (double)n / 1e6 / ms) > best)
			best = (float)(2.0 * (double)n / 1e6 / ms);
	}
out:
	if (a)
		k.cu.mem_free(a);
	if (b)
		k.cu.mem_free(b);
	return (uint64_t)(best * 1000.0f);
}

/* The embedded kernels loaded, the generator's tables copied over: caps for HELLO. Without them
 * (no nvcc at build, a driver that cannot load them) the keeper works as before: kgate stages
 * the inputs from the host and compares them there. */
static uint32_t load_kernels(void)
{
	if (!kg_device_fatbin_size || !k.cu.module_load_data || !k.cu.module_get_function || !k.cu.launch_kernel)
		return 0;
	struct kg_gen_zig z;
	kg_gen_zig_init(&z);
	if (k.cu.module_load_data(&k.module, kg_device_fatbin) ||
	    k.cu.module_get_function(&k.gen_fill, k.module, "kg_gen_fill") ||
	    k.cu.module_get_function(&k.first_diff, k.module, "kg_first_diff") ||
	    k.cu.module_get_function(&k.copy_sets, k.module, "kg_copy_sets") || k.cu.mem_alloc(&k.zig, sizeof(z)) ||
	    k.cu.mem_alloc(&k.diff_word, 8) || k.cu.memcpy_htod_async(k.zig, &z, sizeof(z), k.stream) ||
	    k.cu.stream_synchronize(k.stream))
		return 0;
	k.cu.device_attr(&k.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, k.dev);
	if (k.cu.module_get_function(&k.copy_sets_b, k.module, "kg_copy_sets_b"))
		k.copy_sets_b = NULL;
	if (k.sms <= 0)
		k.sms = 16;
	uint32_t caps = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP;
	size_t pb = (size_t)JUDGE_MAX_PARTS * sizeof(struct kg_dev_cmp);
	if (!k.cu.module_get_function(&k.judge, k.module, "kg_judge") && !k.cu.mem_alloc(&k.parts, pb) &&
	    (k.parts_host = malloc(pb)))
		caps |= KG_DEV_CAP_CHECK;
	return caps;
}

static int init(struct kg_dev_reply *r)
{
	if (load_api(r))
		return r->status;
	CU_OK(k.cu.init(0), "cuInit");
	CU_OK(k.cu.device_get(&k.dev, 0), "cuDeviceGet");
	int fd_ok = 0;
	k.cu.device_attr(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, k.dev);
	if (!fd_ok) {
		snprintf(r->msg, sizeof(r->msg), "the device cannot export memory as a POSIX fd (CUDA VMM)");
		return r->status = -ENOTSUP;
	}
	CU_OK(k.cu.primary_retain(&k.ctx, k.dev), "cuDevicePrimaryCtxRetain");
	CU_OK(k.cu.ctx_set_current(k.ctx), "cuCtxSetCurrent");
	CU_OK(k.cu.stream_create(&k.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_OK(k.cu.event_create(&k.ev0, 0), "cuEventCreate");
	CU_OK(k.cu.event_create(&k.ev1, 0), "cuEventCreate");
	for (int i = 0; i < KG_DEV_MAX_SLOTS; i++) {
		CU_OK(k.cu.event_create(&k.slot[i].go, 0), "cuEventCreate");
		CU_OK(k.cu.event_create(&k.slot[i].got, 0), "cuEventCreate");
	}
	struct kg_cu_alloc_prop p = vmm_prop();
	CU_OK(k.cu.granularity(&k.gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
	if (!k.gran)
		k.gran = 2u << 20;
	int l2 = 0;
	k.cu.device_attr(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, k.dev);
	k.flush_bytes = (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
	CU_OK(k.cu.mem_alloc(&k.flush, k.flush_bytes), "cuMemAlloc (L2 flush buffer)");
	r->l2_bytes = (uint64_t)(l2 > 0 ? l2 : 0);
	r->flush_bytes = k.flush_bytes;
	r->granularity = k.gran;
	r->caps = k.caps = load_kernels();
	size_t mem = 0;
	if (k.cu.total_mem && !k.cu.total_mem(&mem, k.dev))
		r->mem_bytes = mem;
	r->ceiling_mbps = measure_copy_mbps();
	if (!r->ceiling_mbps) {
		/* every span is charged less the least the keeper's copies take at this rate */
		snprintf(r->msg, sizeof(r->msg), "measuring the device's copy rate failed");
		return r->status = -EIO;
	}
	return 0;
}

static int send_reply(int fd, struct kg_dev_reply *r, int pass_fd)
{
	r->magic = KG_DEV_MAGIC;
	return kg_send_fd(fd, r, sizeof(*r), pass_fd) == (ssize_t)sizeof(*r) ? 0 : -1;
}

/* One exportable allocation of `bytes` (granularity-rounded), mapped read-write here. */
static int vmm_alloc(size_t bytes, CUdeviceptr *va, int *fd, struct kg_dev_reply *r)
{
	struct kg_cu_alloc_prop p = vmm_prop();
	CUmemGenericAllocationHandle h = 0;
	CU_OK(k.cu.mem_create(&h, bytes, &p, 0), "cuMemCreate (the runner's device arena)");
	CU_OK(k.cu.mem_export(fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
	CU_OK(k.cu.address_reserve(va, bytes, k.gran, 0, 0), "cuMemAddressReserve");
	CU_OK(k.cu.mem_map(*va, bytes, 0, h, 0), "cuMemMap");
	struct kg_cu_access_desc d = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CU_OK(k.cu.set_access(*va, bytes, &d, 1), "cuMemSetAccess");
	/* the handle lives on in the mapping and in the exported fd; this process keeps both */
	return 0;
}

static int do_attach(const struct kg_dev_cmd *c, int host_fd, struct kg_dev_reply *r, int *out_fd)
{
	int i = 0;
	while (i < KG_DEV_MAX_SLOTS && k.slot[i].used)
		i++;
	struct stat st;
	if (i == KG_DEV_MAX_SLOTS) {
		snprintf(r->msg, sizeof(r->msg), "no free slot (%d arenas attached)", KG_DEV_MAX_SLOTS);
		return r->status = -ENOSPC;
	}
	if (host_fd < 0 || fstat(host_fd, &st) || !c->bytes || (uint64_t)st.st_size < c->bytes) {
		snprintf(r->msg, sizeof(r->msg), "ATTACH without a host arena of %llu bytes", (unsigned long long)c->bytes);
		return r->status = -EINVAL;
	}
	struct slot *s = &k.slot[i];
	s->host = mmap(NULL, c->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, host_fd, 0);
	if (s->host == MAP_FAILED) {
		s->host = NULL;
		snprintf(r->msg, sizeof(r->msg), "mapping the host arena: %s", strerror(errno));
		return r->status = -errno;
	}
	s->host_bytes = c->bytes;
	/* Pinned, the copies run at the link's speed; pageable works where pinning is refused. With
	 * the kernels the inputs are drawn and the outputs judged here, and only guard bands (and a
	 * failing call's outputs) cross: pinning a gigabyte arena (~0.5 s a GiB) would cost more than
	 * it saves. */
	if (!(k.caps & KG_DEV_CAP_CHECK))
		k.cu.host_register(s->host, s->host_bytes, 0);
	/* room for a batched call's sets where kgate asks for it (wire.h) */
	uint64_t want = c->bytes;
	if (c->sets > 1 && c->sets <= KG_DEV_MAX_SETS && c->stride >= c->bytes && c->stride <= UINT64_MAX / c->sets)
		want = (uint64_t)c->sets * c->stride;
	s->dev_bytes = (want + k.gran - 1) / k.gran * k.gran;
	if (vmm_alloc(s->dev_bytes, &s->mirror, out_fd, r))
		return r->status;
	CU_OK(k.cu.mem_alloc(&s->priv, s->dev_bytes), "cuMemAlloc (the private staging and snapshot buffer)");
	s->used = 1;
	r->slot = (uint32_t)i;
	r->dev_bytes = s->dev_bytes;
	return 0;
}

static struct slot *slot_of(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	if (c->slot >= KG_DEV_MAX_SLOTS || !k.slot[c->slot].used || c->bytes > k.slot[c->slot].host_bytes ||
	    c->out_lo > c->out_hi || c->out_hi > c->bytes) {
		snprintf(r->msg, sizeof(r->msg), "bad %s record", kg_dev_op_name(c->op));
		r->status = -EINVAL;
		return NULL;
	}
	return &k.slot[c->slot];
}

struct stage_ctx {
	struct slot *s;
	const struct kg_dev_cmd *c;
	struct kg_dev_reply *r;
	/* a batched call's sets (1: one): GEN and SLOT ranges are staged for every set at once,
	 * after set 0's image is copied to the others */
	uint32_t sets;
	int deferred;
};

/* One range of START's staging on the device (wire.h): a pattern, a draw of the generator, or
 * another slot's staged copy. */
static int stage_range(void *arg, const struct kg_dev_range *g)
{
	const struct stage_ctx *x = arg;
	const struct kg_dev_cmd *c = x->c;
	struct kg_dev_reply *r = x->r;
	CUdeviceptr d = x->s->priv + g->off;
	if (x->deferred && g->kind != KG_DEV_R_FILL)
		return 0;
	if (g->kind == KG_DEV_R_GEN) {
		if (!(k.caps & KG_DEV_CAP_GEN)) {
			snprintf(r->msg, sizeof(r->msg), "a GEN range, and this keeper has no kernels");
			return r->status = -ENOTSUP;
		}
		struct kg_gen_args a = {.t = g->gen, .z = k.zig, .dst = d, .stride = c->stride};
		memcpy(a.key, c->key, sizeof(a.key));
		uint64_t groups = (g->gen.n + 7) / 8, blocks = (groups + 255) / 256, most = (uint64_t)k.sms * 64;
		if (x->sets > 1 && most > 8) /* the sets share the device */
			most = most / x->sets > 8 ? most / x->sets : 8;
		void *params[] = {&a};
		CU_OK(k.cu.launch_kernel(k.gen_fill, (unsigned)(blocks < most ? blocks : most), x->sets, 1, 256, 1, 1, 0,
					 k.stream, params, NULL),
		      "drawing an input on the device");
		return 0;
	}
	if (g->kind == KG_DEV_R_SLOT) {
		for (uint32_t set = 0; set < x->sets; set++)
			CU_OK(k.cu.memcpy_dtod_async(d + set * c->stride, k.slot[c->src_slot].priv + g->off + set * c->stride,
						     g->bytes, k.stream),
			      "staging an input from the reference's copy");
		return 0;
	}
	uint64_t n = g->bytes / g->elem;
	if (g->elem == 1)
		CU_OK(k.cu.memset_d8_async(d, (unsigned char)g->pattern, n, k.stream), "poisoning an output");
	else if (g->elem == 2)
		CU_OK(k.cu.memset_d16_async(d, (unsigned short)g->pattern, n, k.stream), "poisoning an output");
	else if (g->elem == 4)
		CU_OK(k.cu.memset_d32_async(d, (unsigned)g->pattern, n, k.stream), "poisoning an output");
	else { /* 8 bytes: each half as a column of a pitched 2-D memset */
		CU_OK(k.cu.memset_d2d32_async(d, 8, (unsigned)g->pattern, 1, n, k.stream), "poisoning an output");
		CU_OK(k.cu.memset_d2d32_async(d + 4, 8, (unsigned)(g->pattern >> 32), 1, n, k.stream),
		      "poisoning an output");
	}
	return 0;
}

static int stage_host(void *arg, uint64_t off, uint64_t n)
{
	struct stage_ctx *x = arg;
	struct kg_dev_reply *r = x->r;
	CU_OK(k.cu.memcpy_htod_async(x->s->priv + off, x->s->host + off, n, k.stream), "staging the call's inputs");
	return 0;
}

/* [0, n) of each of a batch's sets (its slot's stride apart), from src to dst, on the keeper's
 * stream: a copy a set where they are few, one kernel where they are many (each copy's own cost
 * would be charged inside the span). */
static int copy_sets_of(uint64_t stride, CUdeviceptr dst, CUdeviceptr src, uint64_t n, uint32_t sets,
			struct kg_dev_reply *r)
{
	int wide = !(dst % 16) && !(src % 16) && !(n % 16) && !(stride % 16);
	void *fn = wide ? k.copy_sets : k.copy_sets_b;
	if (sets > 4 && n < (1u << 20) && fn) { /* many small sets; large ones go at the copy engine's rate */
		unsigned long long w = n, st = stride, ns = sets, items = (wide ? n / 16 : n) * sets;
		unsigned long long blocks = (items + 255) / 256, most = (unsigned long long)k.sms * 32;
		void *params[] = {&dst, &src, &w, &st, &ns};
		CU_OK(k.cu.launch_kernel(fn, (unsigned)(blocks < most ? blocks : most), 1, 1, 256, 1, 1, 0, k.stream, params,
					 NULL),
		      "copying a batch's sets");
		return 0;
	}
	for (uint32_t set = 0; set < sets; set++)
		CU_OK(k.cu.memcpy_dtod_async(dst + set * stride, src + set * stride, n, k.stream), "copying a batch's sets");
	return 0;
}

/* The call's start. The inputs come into private memory first, where no context of the
 * candidate's can see them: over the bus, drawn there by the keeper's kernel, or (where kgate names
 * the reference's slot) copied from the reference's private copy of the same inputs; the outputs'
 * poison is written there by the device, not sent (START's ranges, stage.h). Only once the clock
 * has started are they copied onto the mirror (device to device), and the L2 flushed after that
 * copy, so that the call starts cold and a kernel the candidate left running finds its inputs no
 * earlier than the clock does. Both copies are inside the span; kgate subtracts the least they can
 * take at the measured ceiling. */
static int do_start(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	struct kg_stage_src src = {0};
	uint32_t sets = c->sets > 1 ? c->sets : 1;
	if (c->src_slot < KG_DEV_MAX_SLOTS && k.slot[c->src_slot].used && &k.slot[c->src_slot] != s) {
		const struct slot *f = &k.slot[c->src_slot];
		/* a batched call's SLOT ranges read every set of the source: its last START's layout */
		int same = sets == 1 || (f->sets >= sets && f->stride == c->stride && f->snap_sets >= sets);
		src = (struct kg_stage_src){same, f->staged, f->snap_lo, f->snap_hi};
	}
	uint64_t extent = c->bytes;
	if (sets > 1) {
		uint32_t need = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | KG_DEV_CAP_CHECK;
		if ((k.caps & need) != need || sets > KG_DEV_MAX_SETS || c->stride < c->bytes || c->stride % 16 ||
		    c->stride > (s->dev_bytes - c->bytes) / (sets - 1)) {
			snprintf(r->msg, sizeof(r->msg), "bad START: %u sets of %llu bytes do not fit", sets,
				 (unsigned long long)c->stride);
			return r->status = -EINVAL;
		}
		extent = (uint64_t)(sets - 1) * c->stride + c->bytes;
	}
	if (!kg_stage_valid(c, &src)) {
		snprintf(r->msg, sizeof(r->msg), "bad START ranges");
		return r->status = -EINVAL;
	}
	/* nothing of the last call's image is valid from here on, whatever fails part way */
	s->staged = s->snap_lo = s->snap_hi = 0;
	s->snap_ok = s->went = 0;
	s->sets = sets;
	s->snap_sets = 0;
	s->stride = sets > 1 ? c->stride : 0;
	struct stage_ctx sc = {s, c, r, 1, sets > 1};
	if (kg_stage_walk(c, stage_host, stage_range, &sc))
		return r->status;
	if (sets > 1) {
		/* set 0's image (host bytes and patterns) copied to the others, doubling, then each
		 * set's own draws and sources */
		for (uint32_t have = 1; have < sets;) {
			uint32_t n = have < sets - have ? have : sets - have;
			CU_OK(k.cu.memcpy_dtod_async(s->priv + (uint64_t)have * c->stride, s->priv,
						     (uint64_t)(n - 1) * c->stride + c->bytes, k.stream),
			      "copying a batched call's sets");
			have += n;
		}
		/* Every set's image onto the mirror before the clock, but for the inputs, which are
		 * drawn only now: their regions there hold what the last call staged (seen by the
		 * candidate then). Only the inputs' copy is inside the span. */
		CU_OK(k.cu.memcpy_dtod_async(s->mirror, s->priv, extent, k.stream), "copying a batched call's sets");
		sc.sets = sets;
		sc.deferred = 0;
		for (uint32_t i = 0; i < c->n_ranges; i++)
			if (c->range[i].kind != KG_DEV_R_FILL && stage_range(&sc, &c->range[i]))
				return r->status;
	}
	CU_OK(k.cu.stream_synchronize(k.stream), "staging the call's inputs (sync)");
	s->staged = extent;
	/* Whatever the candidate's context set aside or windowed as persisting since the last call:
	 * demoted, and the set-aside taken back, before the flush evicts the L2. */
	if (k.cu.reset_persisting_l2)
		k.cu.reset_persisting_l2();
	if (k.cu.ctx_set_limit)
		k.cu.ctx_set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
	r->t_ns = kg_now_ns();
	/* with nothing to copy (the calibration) a page all the same: the device switches to this
	 * context for it, as it does in every call */
	size_t n = c->bytes ? extent : s->dev_bytes < 4096 ? s->dev_bytes : 4096;
	CU_OK(k.cu.event_record(s->go, k.stream), "cuEventRecord");
	s->went = 1;
	if (sets > 1) {
		/* one copy over every set's inputs, from the first input's 16 bytes to the last's: the
		 * bands between them go again, as they already are on the mirror */
		uint64_t lo = UINT64_MAX, hi = 0;
		for (uint32_t i = 0; i < c->n_ranges; i++)
			if (c->range[i].kind != KG_DEV_R_FILL) {
				lo = c->range[i].off < lo ? c->range[i].off : lo;
				hi = c->range[i].off + c->range[i].bytes > hi ? c->range[i].off + c->range[i].bytes : hi;
			}
		lo = lo / 16 * 16;
		hi = (hi + 15) / 16 * 16 < c->stride ? (hi + 15) / 16 * 16 : c->stride;
		if (hi > lo && copy_sets_of(s->stride, s->mirror + lo, s->priv + lo, hi - lo, sets, r))
			return r->status;
	} else {
		CU_OK(k.cu.memcpy_dtod_async(s->mirror, s->priv, n, k.stream), "copying the call's inputs onto the device arena");
	}
	if (c->flush) {
		/* a different value every time: no compression or cache shortcut keeps old lines */
		k.flush_value = k.flush_value * 1664525u + 1013904223u;
		CU_OK(k.cu.memset_d32_async(k.flush, k.flush_value, k.flush_bytes / 4, k.stream), "L2 flush");
	}
	CU_OK(k.cu.stream_synchronize(k.stream), "copying the call's inputs (sync)");
	return 0;
}

/* The mirror's [0, hi) against the private copy (what START staged, and END's snapshot over it)
 * by kg_first_diff: r's in_state and in_diff. */
static int image_compare(struct slot *s, uint64_t hi, struct kg_dev_reply *r)
{
	unsigned long long words = (hi + 7) / 8, most = (unsigned long long)k.sms * 32, first = ~0ull;
	unsigned long long blocks = (words + 255) / 256;
	CUdeviceptr x = s->mirror, y = s->priv, w = k.diff_word;
	void *params[] = {&x, &y, &words, &w};
	CU_OK(k.cu.memset_d32_async(k.diff_word, 0xffffffffu, 2, k.stream), "comparing the inputs");
	CU_OK(k.cu.launch_kernel(k.first_diff, (unsigned)(blocks < most ? blocks : most), 1, 1, 256, 1, 1, 0, k.stream,
				 params, NULL),
	      "comparing the inputs");
	CU_OK(k.cu.memcpy_dtoh_async(&first, k.diff_word, 8, k.stream), "comparing the inputs");
	CU_OK(k.cu.stream_synchronize(k.stream), "comparing the inputs (sync)");
	r->in_state = first == ~0ull ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
	r->in_diff = first == ~0ull ? 0 : first * 8;
	return 0;
}

/* END's and SETTLE's look at [0, in_hi) (below the outputs): the mirror against what START staged
 * there, by kg_first_diff; *from is where the host arena's refresh starts (in_hi when the same). */
static int inputs_compare(struct slot *s, const struct kg_dev_cmd *c, uint64_t hi, int look, uint64_t *from,
			  struct kg_dev_reply *r)
{
	*from = 0;
	r->in_state = KG_DEV_IN_UNCHECKED;
	if (!hi || !(k.caps & KG_DEV_CAP_CMP))
		return 0;
	/* in_hi below the outputs: END's, and the last snapshot's (SETTLE) */
	if (hi > c->bytes ||
	    (!look && ((hi > c->out_lo && c->out_hi > c->out_lo) || (s->snap_hi > s->snap_lo && hi > s->snap_lo)))) {
		snprintf(r->msg, sizeof(r->msg), "in_hi past the outputs");
		return r->status = -EINVAL;
	}
	if (image_compare(s, hi, r))
		return r->status;
	if (r->in_state == KG_DEV_IN_SAME)
		*from = hi;
	return 0;
}

/* The host arena's [from, bytes) refreshed: from the mirror, outputs [lo, hi) from the snapshot
 * (unless keep: they stay on the device for CHECK). */
static int download(struct slot *s, uint64_t bytes, uint64_t from, uint64_t lo, uint64_t hi, int keep,
		    struct kg_dev_reply *r)
{
	if (lo < from)
		lo = from;
	if (hi < lo)
		hi = lo;
	if (lo > from)
		CU_OK(k.cu.memcpy_dtoh_async(s->host + from, s->mirror + from, lo - from, k.stream), "download");
	if (hi > lo && !keep)
		CU_OK(k.cu.memcpy_dtoh_async(s->host + lo, s->priv + lo, hi - lo, k.stream), "download (snapshot)");
	if (bytes > hi)
		CU_OK(k.cu.memcpy_dtoh_async(s->host + hi, s->mirror + hi, bytes - hi, k.stream), "download");
	CU_OK(k.cu.stream_synchronize(k.stream), "download (sync)");
	return 0;
}

static int do_end(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	uint64_t lo = c->out_lo, hi = c->out_hi;
	uint32_t sets = c->sets > 1 ? c->sets : 1;
	if (sets != (s->sets > 1 ? s->sets : 1) || (sets > 1 && (c->stride != s->stride || !c->keep || hi <= lo || hi > c->bytes))) {
		snprintf(r->msg, sizeof(r->msg), "bad END: %u sets, and START staged %u", sets, s->sets);
		return r->status = -EINVAL;
	}
	CU_OK(k.cu.event_record(k.ev0, k.stream), "cuEventRecord");
	/* With no outputs (the calibration), a page all the same: the device switches to this context
	 * for any copy, and that switch is part of every call's span, so it must be of the calibrated
	 * one too. */
	if (hi <= lo)
		lo = hi = 0;
	uint64_t n = hi > lo ? hi - lo : s->dev_bytes < 4096 ? s->dev_bytes : 4096;
	s->snap_lo = lo;
	s->snap_hi = lo + n; /* what of the staged image the snapshot overwrites */
	s->snap_ok = 0; /* judged (CHECK, FETCH) only once complete */
	s->snap_sets = sets;
	if (copy_sets_of(s->stride, s->priv + lo, s->mirror + lo, n, sets, r))
		return r->status;
	CU_OK(k.cu.event_record(k.ev1, k.stream), "cuEventRecord");
	CU_OK(k.cu.event_record(s->got, k.stream), "cuEventRecord");
	CU_OK(k.cu.stream_synchronize(k.stream), "the outputs' snapshot (sync)");
	s->snap_ok = 1;
	r->t_ns = kg_now_ns();
	float ms = 0;
	if (!k.cu.event_elapsed(&ms, k.ev0, k.ev1))
		r->copy_ns = (uint64_t)((double)ms * 1e6);
	/* The span on the device's own clock: none of the keeper's host-side waits before the copy
	 * began or after the snapshot was complete is in it. */
	if (s->went && !k.cu.event_elapsed(&ms, s->go, s->got) && ms > 0)
		r->dev_ns = (uint64_t)((double)ms * 1e6);
	s->went = 0;
	if (sets > 1) /* every set's inputs and bands, against START's; nothing sent */
		return image_compare(s, s->staged, r);
	uint64_t from;
	if (inputs_compare(s, c, c->in_hi, 0, &from, r))
		return r->status;
	return download(s, c->bytes, from, lo, hi, c->keep != 0, r);
}

static int do_settle(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	struct timespec ts = {.tv_sec = c->delay_ms / 1000, .tv_nsec = (long)(c->delay_ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	uint64_t from;
	if (c->look && s->snap_sets > 1) /* every set of a batched call */
		return image_compare(s, s->staged, r);
	if (c->look) /* the whole image, against the staged inputs and END's snapshot; nothing sent */
		return inputs_compare(s, c, c->bytes, 1, &from, r);
	if (inputs_compare(s, c, c->in_hi, 0, &from, r))
		return r->status;
	return download(s, c->bytes, from, from, from, 0, r);
}

/* [off, off + bytes) inside what the slot's last END snapshotted */
static int in_snapshot(const struct slot *s, uint64_t off, uint64_t bytes)
{
	if (!s->snap_ok || off < s->snap_lo)
		return 0;
	if (s->snap_sets > 1) { /* which set's outputs, then as in set 0 */
		uint64_t set = (off - s->snap_lo) / s->stride;
		if (set >= s->snap_sets)
			return 0;
		off -= set * s->stride;
	}
	return bytes <= s->snap_hi - s->snap_lo && off - s->snap_lo <= s->snap_hi - s->snap_lo - bytes;
}

/* One check (wire.h) on the device: the kernel's partial results merged in order. */
static int judge_one(struct slot *s, struct slot *ref, const struct kg_dev_check *c, struct kg_dev_cmp *out,
		     struct kg_dev_reply *r)
{
	unsigned es = kg_gen_dtype_size(c->dtype);
	uint64_t bytes = c->n * es;
	kg_judge_init(out);
	if (!kg_judge_valid(c) || c->off % es || c->ref_off % es || !in_snapshot(s, c->off, bytes) ||
	    (c->mode == KG_DEV_CHK_COMPARE && (!ref || !in_snapshot(ref, c->ref_off, bytes)))) {
		snprintf(r->msg, sizeof(r->msg), "bad CHECK: not an output of the last snapshot");
		return r->status = -EINVAL;
	}
	if (!c->n)
		return 0;
	struct kg_judge_args a = {.c = *c, .got = s->priv + c->off, .exp = ref ? ref->priv + c->ref_off : 0, .part = k.parts};
	a.factor = c->mode == KG_DEV_CHK_COMPARE && c->row && !kg_gen_is_int(c->dtype);
	a.len = a.factor ? c->row : JUDGE_CHUNK;
	a.rows = (c->n + a.len - 1) / a.len;
	a.per = (a.rows + JUDGE_MAX_PARTS - 1) / JUDGE_MAX_PARTS;
	unsigned long long parts = (a.rows + a.per - 1) / a.per;
	void *params[] = {&a};
	CU_OK(k.cu.launch_kernel(k.judge, (unsigned)parts, 1, 1, JUDGE_THREADS, 1, 1, 0, k.stream, params, NULL),
	      "judging an output on the device");
	CU_OK(k.cu.memcpy_dtoh_async(k.parts_host, k.parts, parts * sizeof(struct kg_dev_cmp), k.stream),
	      "judging an output on the device");
	CU_OK(k.cu.stream_synchronize(k.stream), "judging an output on the device (sync)");
	for (unsigned long long i = 0; i < parts; i++)
		kg_judge_merge(out, &k.parts_host[i]);
	return 0;
}

/* CHECK: the outputs of the slot's last call judged where they are, against the reference's
 * (src_slot's) last ones: nothing of either crosses the bus but the figures. */
static int do_check(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	if (!(k.caps & KG_DEV_CAP_CHECK) || c->n_checks > KG_DEV_MAX_CHECKS) {
		snprintf(r->msg, sizeof(r->msg), !(k.caps & KG_DEV_CAP_CHECK) ? "this keeper has no kernels" : "bad CHECK");
		return r->status = !(k.caps & KG_DEV_CAP_CHECK) ? -ENOTSUP : -EINVAL;
	}
	struct slot *ref = c->src_slot < KG_DEV_MAX_SLOTS && k.slot[c->src_slot].used && &k.slot[c->src_slot] != s
				   ? &k.slot[c->src_slot]
				   : NULL;
	for (uint32_t i = 0; i < c->n_checks; i++)
		if (judge_one(s, ref, &c->check[i], &r->cmp[i], r))
			return r->status;
	return 0;
}

/* FETCH: the snapshot's [out_lo, out_hi) into the host arena, for the host's own look. */
static int do_fetch(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	/* a batch's set `sets` (0: the first), into the host arena's one layout */
	uint64_t at = c->sets && c->sets < s->snap_sets ? (uint64_t)c->sets * s->stride : c->sets ? UINT64_MAX : 0;
	if (c->out_hi <= c->out_lo || at == UINT64_MAX || !in_snapshot(s, c->out_lo + at, c->out_hi - c->out_lo)) {
		snprintf(r->msg, sizeof(r->msg), "bad FETCH: not within the last snapshot");
		return r->status = -EINVAL;
	}
	CU_OK(k.cu.memcpy_dtoh_async(s->host + c->out_lo, s->priv + c->out_lo + at, c->out_hi - c->out_lo, k.stream), "fetch");
	CU_OK(k.cu.stream_synchronize(k.stream), "fetch (sync)");
	return 0;
}

/* A torn record reads as a short one: answered as malformed. */
static ssize_t recv_cmd(int fd, struct kg_dev_cmd *c, int *got_fd)
{
	ssize_t n = kg_recv_fd(fd, c, sizeof(*c), got_fd);
	return n == -2 ? 1 : n;
}

int main(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: kgate-device  (started by kgate; fd 3 is its control socket)\n");
		return 2;
	}
	/* kgate's helper: it ends with kgate, whatever kgate's end */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	int ctl = KG_DEV_CTL_FD;
	struct kg_dev_reply hello = {.op = KG_DEV_HELLO};
	int rc = init(&hello);
	if (send_reply(ctl, &hello, -1) || rc)
		return 1;
	uint32_t last = 0;
	for (;;) {
		struct kg_dev_cmd c;
		int fd = -1;
		if (last == KG_DEV_START) { /* END comes within the call's span: polled for (wire.h) */
			struct pollfd p = {.fd = ctl, .events = POLLIN};
			uint64_t until = kg_now_ns() + KG_SPIN_NS;
			while (poll(&p, 1, 0) == 0 && kg_now_ns() < until)
				;
		}
		ssize_t n = recv_cmd(ctl, &c, &fd);
		if (n <= 0)
			return 0; /* kgate went away */
		struct kg_dev_reply r = {.op = c.op, .seq = c.seq};
		int out_fd = -1;
		if (n != (ssize_t)sizeof(c) || c.magic != KG_DEV_MAGIC) {
			snprintf(r.msg, sizeof(r.msg), "malformed record");
			r.status = -EPROTO;
		} else if (c.op == KG_DEV_ATTACH) {
			do_attach(&c, fd, &r, &out_fd);
		} else if (c.op == KG_DEV_START) {
			do_start(&c, &r);
		} else if (c.op == KG_DEV_END) {
			do_end(&c, &r);
		} else if (c.op == KG_DEV_SETTLE) {
			do_settle(&c, &r);
		} else if (c.op == KG_DEV_CHECK) {
			do_check(&c, &r);
		} else if (c.op == KG_DEV_FETCH) {
			do_fetch(&c, &r);
		} else if (c.op == KG_DEV_QUIT) {
			send_reply(ctl, &r, -1);
			return 0;
		} else {
			snprintf(r.msg, sizeof(r.msg), "unknown op %u", c.op);
			r.status = -EPROTO;
		}
		if (fd >= 0)
			close(fd);
		int sent = send_reply(ctl, &r, r.status ? -1 : out_fd);
		if (out_fd >= 0)
			close(out_fd);
		if (sent)
			return 1;
		last = r.status ? 0 : c.op;
	}
}

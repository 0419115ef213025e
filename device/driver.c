/* kgate-device's driver side: libcuda loaded by dlopen (so that kgate runs where no driver is),
 * the primary context, the keeper's stream, events and kernels (device/kernels.cu, embedded), the
 * L2 flush buffer and the device's copy bandwidth, and the exportable allocations (CUDA VMM, a
 * POSIX fd) that become the runners' device arenas. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kg_common.h"
#include "device/keeper_int.h"

struct kg_dev_state kg_dev;

int kg_dev_cu_fail(CUresult rc, const char *what, struct kg_dev_reply *r)
{
	const char *s = NULL;
	if (kg_dev.cu.error_string)
		kg_dev.cu.error_string(rc, &s);
	snprintf(r->msg, sizeof(r->msg), "%s: CUDA error %d (%s)", what, rc, s ? s : "unknown");
	r->status = -EIO;
	return -EIO;
}


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
		{"cuStreamWaitValue32_v2", offsetof(struct cu_api, wait_value32)},
		{"cuStreamWriteValue32_v2", offsetof(struct cu_api, write_value32)},
		{"cuMemHostGetDevicePointer_v2", offsetof(struct cu_api, host_device_ptr)},
		{"cuMemHostUnregister", offsetof(struct cu_api, host_unregister)},
		{"cuEventQuery", offsetof(struct cu_api, event_query)},
		{"cuMemGetInfo_v2", offsetof(struct cu_api, mem_get_info)},
		{"cuMemRetainAllocationHandle", offsetof(struct cu_api, retain_handle)},
		{"cuMemRelease", offsetof(struct cu_api, mem_release)},
	};
	const size_t n_required = 27;
	const char *missing = kg_cu_resolve(lib, syms, sizeof(syms) / sizeof(syms[0]), n_required, &kg_dev.cu);
	if (missing) {
		snprintf(r->msg, sizeof(r->msg), "libcuda lacks %s", missing);
		r->status = -ENOSYS;
		return -ENOSYS;
	}
	/* the stream memory operations under their first names, where a driver has no _v2 */
	if (!kg_dev.cu.wait_value32)
		*(void **)&kg_dev.cu.wait_value32 = dlsym(lib, "cuStreamWaitValue32");
	if (!kg_dev.cu.write_value32)
		*(void **)&kg_dev.cu.write_value32 = dlsym(lib, "cuStreamWriteValue32");
	return 0;
}

static struct kg_cu_alloc_prop vmm_prop(void)
{
	struct kg_cu_alloc_prop p;
	memset(&p, 0, sizeof(p));
	p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
	p.requested_handle_types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
	p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	p.location.id = kg_dev.dev;
	return p;
}

/* The ceiling kgate's roofline check believes: a device-to-device copy of 512 MB, best of five,
 * bytes read plus written, measured here where nothing untrusted runs. */
static uint64_t measure_copy_mbps(void)
{
	const size_t n = 512u << 20;
	CUdeviceptr a = 0, b = 0;
	float best = 0;
	if (kg_dev.cu.mem_alloc(&a, n) || kg_dev.cu.mem_alloc(&b, n))
		goto out;
	kg_dev.cu.memset_d32_async(a, 0x3f800000u, n / 4, kg_dev.stream);
	for (int i = 0; i < 6; i++) {
		float ms = 0;
		if (kg_dev.cu.event_record(kg_dev.ev0, kg_dev.stream) || kg_dev.cu.memcpy_dtod_async(b, a, n, kg_dev.stream) ||
		    kg_dev.cu.event_record(kg_dev.ev1, kg_dev.stream) || kg_dev.cu.stream_synchronize(kg_dev.stream) ||
		    kg_dev.cu.event_elapsed(&ms, kg_dev.ev0, kg_dev.ev1))
			goto out;
		if (i > 0 && ms > 0 && (float)(2.0 * (double)n / 1e6 / ms) > best)
			best = (float)(2.0 * (double)n / 1e6 / ms);
	}
out:
	if (a)
		kg_dev.cu.mem_free(a);
	if (b)
		kg_dev.cu.mem_free(b);
	return (uint64_t)(best * 1000.0f);
}

/* The embedded kernels loaded, the generator's tables copied over: caps for HELLO. Without them
 * (no nvcc at build, a driver that cannot load them) the keeper works as before: kgate stages
 * the inputs from the host and compares them there. */
static uint32_t load_kernels(void)
{
	if (!kg_device_fatbin_size || !kg_dev.cu.module_load_data || !kg_dev.cu.module_get_function || !kg_dev.cu.launch_kernel)
		return 0;
	struct kg_gen_zig z;
	kg_gen_zig_init(&z);
	if (kg_dev.cu.module_load_data(&kg_dev.module, kg_device_fatbin) ||
	    kg_dev.cu.module_get_function(&kg_dev.gen_fill, kg_dev.module, "kg_gen_fill") ||
	    kg_dev.cu.module_get_function(&kg_dev.first_diff, kg_dev.module, "kg_first_diff") ||
	    kg_dev.cu.module_get_function(&kg_dev.copy_sets, kg_dev.module, "kg_copy_sets") ||
	    kg_dev.cu.module_get_function(&kg_dev.flush_fn, kg_dev.module, "kg_flush") || kg_dev.cu.mem_alloc(&kg_dev.zig, sizeof(z)) ||
	    kg_dev.cu.mem_alloc(&kg_dev.diff_word, 8) || kg_dev.cu.memcpy_htod_async(kg_dev.zig, &z, sizeof(z), kg_dev.stream) ||
	    kg_dev.cu.stream_synchronize(kg_dev.stream))
		return 0;
	kg_dev.cu.device_attr(&kg_dev.sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, kg_dev.dev);
	if (kg_dev.cu.module_get_function(&kg_dev.copy_sets_b, kg_dev.module, "kg_copy_sets_b"))
		kg_dev.copy_sets_b = NULL;
	if (kg_dev.sms <= 0)
		kg_dev.sms = 16;
	uint32_t caps = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP;
	size_t pb = (size_t)JUDGE_MAX_PARTS * sizeof(struct kg_dev_cmp);
	if (!kg_dev.cu.module_get_function(&kg_dev.judge, kg_dev.module, "kg_judge") && !kg_dev.cu.mem_alloc(&kg_dev.parts, pb) &&
	    (kg_dev.parts_host = malloc(pb)))
		caps |= KG_DEV_CAP_CHECK;
	return caps;
}

int kg_dev_flush_on(CUstream st, struct kg_dev_reply *r)
{
	/* a different value every time: no compression or cache shortcut keeps old lines */
	kg_dev.flush_value = kg_dev.flush_value * 1664525u + 1013904223u;
	if (!kg_dev.flush_fn) {
		CU_OK(kg_dev.cu.memset_d32_async(kg_dev.flush, kg_dev.flush_value, kg_dev.flush_bytes / 4, st), "L2 flush");
		return 0;
	}
	CUdeviceptr p = kg_dev.flush;
	unsigned long long n = kg_dev.flush_bytes / 16;
	unsigned v = kg_dev.flush_value;
	void *params[] = {&p, &n, &v};
	unsigned blocks = (unsigned)(kg_dev.sms > 0 ? kg_dev.sms * 8 : 128);
	CU_OK(kg_dev.cu.launch_kernel(kg_dev.flush_fn, blocks, 1, 1, 256, 1, 1, 0, st, params, NULL), "L2 flush");
	return 0;
}

uint64_t kg_dev_mem_free(void)
{
	size_t free_b = 0, total = 0;
	if (!kg_dev.cu.mem_get_info || kg_dev.cu.mem_get_info(&free_b, &total))
		return 0;
	return free_b;
}

/* A flush's time on the quiet device (nothing but this process on it yet): the median of nine,
 * after three to bring the clocks up. What a later flush takes beyond it, another context's work
 * took from it. */
static uint64_t measure_quiet_flush(void)
{
	uint64_t t[9];
	struct kg_dev_reply r = {0};
	for (int i = 0; i < 12; i++) {
		float ms = 0;
		if (kg_dev.cu.event_record(kg_dev.ev0, kg_dev.stream) || kg_dev_flush_on(kg_dev.stream, &r) ||
		    kg_dev.cu.event_record(kg_dev.ev1, kg_dev.stream) || kg_dev.cu.stream_synchronize(kg_dev.stream) ||
		    kg_dev.cu.event_elapsed(&ms, kg_dev.ev0, kg_dev.ev1))
			return 0;
		if (i >= 3)
			t[i - 3] = (uint64_t)((double)ms * 1e6);
	}
	for (int i = 1; i < 9; i++) /* insertion sort: nine figures */
		for (int j = i; j > 0 && t[j - 1] > t[j]; j--) {
			uint64_t x = t[j];
			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[4];
}

/* Whether gated calls work here: one stream of this process waits on a word of pinned host memory
 * that another stream writes, and then writes a second word, read back from the CPU within a
 * second. Across processes it is the trusted runner's calibration, before LOAD, that shows it. */
static int gate_self_test(void)
{
	if (!kg_dev.cu.wait_value32 || !kg_dev.cu.write_value32 || !kg_dev.cu.host_device_ptr || !kg_dev.cu.event_query ||
	    !kg_dev.flush_fn)
		return 0;
	void *page = NULL;
	CUstream a = NULL, b = NULL;
	CUdeviceptr d = 0;
	int ok = 0;
	if (posix_memalign(&page, KG_DEV_GATE_BYTES, KG_DEV_GATE_BYTES))
		return 0;
	memset(page, 0, KG_DEV_GATE_BYTES);
	volatile uint32_t *w = page;
	if (kg_dev.cu.host_register(page, KG_DEV_GATE_BYTES, CU_MEMHOSTREGISTER_DEVICEMAP)) {
		free(page);
		return 0;
	}
	if (!kg_dev.cu.host_device_ptr(&d, page, 0) && !kg_dev.cu.stream_create(&a, CU_STREAM_NON_BLOCKING) &&
	    !kg_dev.cu.stream_create(&b, CU_STREAM_NON_BLOCKING) &&
	    !kg_dev.cu.wait_value32(a, d + KG_DEV_GATE_ARMED, 1, CU_STREAM_WAIT_VALUE_GEQ) &&
	    !kg_dev.cu.write_value32(a, d + KG_DEV_GATE_DONE, 7, CU_STREAM_WRITE_VALUE_DEFAULT) &&
	    !kg_dev.cu.event_record(kg_dev.ev0, a) &&
	    !kg_dev.cu.write_value32(b, d + KG_DEV_GATE_ARMED, 1, CU_STREAM_WRITE_VALUE_DEFAULT)) {
		for (int i = 0; i < 1000 && kg_dev.cu.event_query(kg_dev.ev0) == CUDA_ERROR_NOT_READY; i++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		if (kg_dev.cu.event_query(kg_dev.ev0) == CUDA_ERROR_NOT_READY)
			__atomic_store_n(&w[KG_DEV_GATE_ARMED / 4], 1u, __ATOMIC_RELEASE); /* let it go */
		else
			ok = __atomic_load_n(&w[KG_DEV_GATE_DONE / 4], __ATOMIC_ACQUIRE) == 7;
		kg_dev.cu.stream_synchronize(a);
	}
	if (b)
		kg_dev.cu.stream_synchronize(b);
	if (kg_dev.cu.host_unregister)
		kg_dev.cu.host_unregister(page);
	/* the streams stay: a stream destroyed under a wait is the driver's to untangle */
	free(page);
	return ok;
}

int kg_dev_init(struct kg_dev_reply *r)
{
	if (load_api(r))
		return r->status;
	CU_OK(kg_dev.cu.init(0), "cuInit");
	CU_OK(kg_dev.cu.device_get(&kg_dev.dev, 0), "cuDeviceGet");
	int fd_ok = 0;
	kg_dev.cu.device_attr(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, kg_dev.dev);
	if (!fd_ok) {
		snprintf(r->msg, sizeof(r->msg), "the device cannot export memory as a POSIX fd (CUDA VMM)");
		return r->status = -ENOTSUP;
	}
	CU_OK(kg_dev.cu.primary_retain(&kg_dev.ctx, kg_dev.dev), "cuDevicePrimaryCtxRetain");
	CU_OK(kg_dev.cu.ctx_set_current(kg_dev.ctx), "cuCtxSetCurrent");
	CU_OK(kg_dev.cu.stream_create(&kg_dev.stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
	CU_OK(kg_dev.cu.event_create(&kg_dev.ev0, 0), "cuEventCreate");
	CU_OK(kg_dev.cu.event_create(&kg_dev.ev1, 0), "cuEventCreate");
	for (int i = 0; i < KG_DEV_MAX_SLOTS; i++) {
		CU_OK(kg_dev.cu.event_create(&kg_dev.slot[i].go, 0), "cuEventCreate");
		CU_OK(kg_dev.cu.event_create(&kg_dev.slot[i].got, 0), "cuEventCreate");
		for (int k = 0; k < KG_DEV_MAX_GATED_SETS; k++) {
			CU_OK(kg_dev.cu.event_create(&kg_dev.slot[i].fl0[k], 0), "cuEventCreate");
			CU_OK(kg_dev.cu.event_create(&kg_dev.slot[i].fl1[k], 0), "cuEventCreate");
		}
	}
	struct kg_cu_alloc_prop p = vmm_prop();
	CU_OK(kg_dev.cu.granularity(&kg_dev.gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
	if (!kg_dev.gran)
		kg_dev.gran = 2u << 20;
	int l2 = 0;
	kg_dev.cu.device_attr(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, kg_dev.dev);
	kg_dev.flush_bytes = (size_t)(l2 > 0 ? l2 : 64 << 20) * 2;
	CU_OK(kg_dev.cu.mem_alloc(&kg_dev.flush, kg_dev.flush_bytes), "cuMemAlloc (L2 flush buffer)");
	r->l2_bytes = (uint64_t)(l2 > 0 ? l2 : 0);
	r->flush_bytes = kg_dev.flush_bytes;
	r->granularity = kg_dev.gran;
	r->caps = kg_dev.caps = load_kernels();
	size_t mem = 0;
	if (kg_dev.cu.total_mem && !kg_dev.cu.total_mem(&mem, kg_dev.dev))
		r->mem_bytes = mem;
	r->ceiling_mbps = kg_dev.ceiling_mbps = measure_copy_mbps();
	if (!r->ceiling_mbps) {
		/* every span is charged less the least the keeper's copies take at this rate */
		snprintf(r->msg, sizeof(r->msg), "measuring the device's copy rate failed");
		return r->status = -EIO;
	}
	r->flush_ns = kg_dev.quiet_flush_ns = measure_quiet_flush();
	/* gated calls need the kernels too (a batch's; the timed flush); the mid-call probe a buffer */
	if ((kg_dev.caps & KG_DEV_CAP_CHECK) && !kg_dev.cu.mem_alloc(&kg_dev.probe_buf, KG_DEV_PROBE_MAX) && gate_self_test())
		r->caps = kg_dev.caps |= KG_DEV_CAP_GATE;
	r->mem_free = kg_dev_mem_free();
	return 0;
}

/* One exportable allocation of `bytes` (granularity-rounded), mapped read-write here. */
int kg_dev_vmm_alloc(size_t bytes, CUdeviceptr *va, int *fd, struct kg_dev_reply *r)
{
	struct kg_cu_alloc_prop p = vmm_prop();
	CUmemGenericAllocationHandle h = 0;
	CU_OK(kg_dev.cu.mem_create(&h, bytes, &p, 0), "cuMemCreate (the runner's device arena)");
	CU_OK(kg_dev.cu.mem_export(fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
	CU_OK(kg_dev.cu.address_reserve(va, bytes, kg_dev.gran, 0, 0), "cuMemAddressReserve");
	CU_OK(kg_dev.cu.mem_map(*va, bytes, 0, h, 0), "cuMemMap");
	struct kg_cu_access_desc d = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
	CU_OK(kg_dev.cu.set_access(*va, bytes, &d, 1), "cuMemSetAccess");
	/* the handle lives on in the mapping and in the exported fd; this process keeps both */
	return 0;
}


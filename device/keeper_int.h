/* What kgate-device's two files share: the driver API it loads (dlopen, libcuda), the kernels'
 * argument layouts, the slots (one per runner's arena) and the one state they live in. driver.c
 * brings the driver up (the API, the context, the stream, the kernels, the flush buffer) and makes
 * the exportable allocations; keeper.c serves kgate's commands. */
#ifndef KG_DEVICE_KEEPER_INT_H
#define KG_DEVICE_KEEPER_INT_H

#include <stddef.h>
#include <stdint.h>

#include "kg_cudrv.h"
#include "device/judge.h"
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
	/* optional: an arena exported again (EXPORT) */
	CUresult (*retain_handle)(CUmemGenericAllocationHandle *, void *);
	CUresult (*mem_release)(CUmemGenericAllocationHandle);
	/* optional: the persisting-L2 controls */
	CUresult (*ctx_set_limit)(int, size_t);
	CUresult (*reset_persisting_l2)(void);
	/* optional: the keeper's own kernels */
	CUresult (*module_load_data)(void **, const void *);
	CUresult (*module_get_function)(void **, void *, const char *);
	CUresult (*launch_kernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,
				  void **, void **);
	CUresult (*total_mem)(size_t *, CUdevice); /* optional */
	/* optional: gated calls (KG_DEV_CAP_GATE) and the device's free memory */
	CUresult (*wait_value32)(CUstream, CUdeviceptr, unsigned, unsigned);
	CUresult (*write_value32)(CUstream, CUdeviceptr, unsigned, unsigned);
	CUresult (*host_device_ptr)(CUdeviceptr *, void *, unsigned);
	CUresult (*host_unregister)(void *);
	CUresult (*event_query)(CUevent);
	CUresult (*mem_get_info)(size_t *, size_t *);
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
	/* Gated calls (wire.h's gate page, GATE): the page as mapped here and its device address, the
	 * slot's own stream, where a gated call's steps wait (never in front of the keeper's other
	 * work), a stream for the mid-call probe, the last token given, and the call whose steps are
	 * queued and not yet seen through by END (gate_open: its first token and sets). */
	volatile uint32_t *gate_host;
	CUdeviceptr gate_dev;
	CUstream gstream, pstream;
	uint32_t tok, gate_tok, gate_sets;
	int gate_open;
	/* the flush before each set's release (or the one of an ungated call), on these events;
	 * flushed: the last call's were recorded; flush_ns: an ungated call's, read at START */
	CUevent fl0[KG_DEV_MAX_GATED_SETS], fl1[KG_DEV_MAX_GATED_SETS];
	int flushed;
	uint64_t flush_ns;
	/* the last gated call's mid-call probe: what it captured into kg_dev.probe_buf */
	int probing;
	uint64_t probe_off[2], probe_bytes[2];
};

struct kg_dev_state {
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
	void *module, *gen_fill, *first_diff, *judge, *copy_sets, *copy_sets_b, *flush_fn;
	CUdeviceptr zig, diff_word, parts;
	struct kg_dev_cmp *parts_host;
	int sms;
	uint64_t ceiling_mbps; /* the device-to-device copy rate measured at start */
	uint64_t quiet_flush_ns; /* a flush's time measured at start, nothing else on the device */
	CUdeviceptr probe_buf; /* KG_DEV_PROBE_MAX bytes: a mid-call probe's capture */
};

/* The keeper's one state: the driver, its stream and events, the slots (driver.c defines it). */
extern struct kg_dev_state kg_dev;


/* A driver call's failure as the reply's status and words: -EIO. */
int kg_dev_cu_fail(CUresult rc, const char *what, struct kg_dev_reply *r);

#define CU_OK(call, what)                                                                                            \
	do {                                                                                                         \
		CUresult rc_ = (call);                                                                               \
		if (rc_)                                                                                             \
			return kg_dev_cu_fail(rc_, what, r);                                                                \
	} while (0)

/* The driver, the device's context, stream, events, kernels and flush buffer; 0 or -errno with r's
 * words. */
int kg_dev_init(struct kg_dev_reply *r);
/* One exportable allocation of `bytes` (granularity-rounded), mapped read-write here. */
int kg_dev_vmm_alloc(size_t bytes, CUdeviceptr *va, int *fd, struct kg_dev_reply *r);
/* The L2 flush (a kernel where the keeper has its kernels: it runs on the compute engine, and a
 * context that holds the device beside it shows in its time) queued on st. */
int kg_dev_flush_on(CUstream st, struct kg_dev_reply *r);
/* The device's free memory now, 0 where it cannot be read. */
uint64_t kg_dev_mem_free(void);

#endif

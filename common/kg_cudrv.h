/* The CUDA driver API's types and constants that kgate's device code uses (the keeper in device/,
 * the runner's CUDA backend), declared here with the driver's ABI so that kgate builds where no
 * CUDA toolkit is installed: libcuda itself is always loaded with dlopen. */
#ifndef KG_CUDRV_H
#define KG_CUDRV_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;

#define CU_STREAM_NON_BLOCKING 0x1
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE 38
#define CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED 103
#define CU_LIMIT_PERSISTING_L2_CACHE_SIZE 0x06
#define CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW 1
#define CUDA_ERROR_NOT_READY 600 /* cuEventQuery: the work before the event is not done */

/* stream memory operations (cuStreamWaitValue32, cuStreamWriteValue32) and host memory the device
 * reads (cuMemHostRegister) */
#define CU_STREAM_WAIT_VALUE_GEQ 0x0 /* (int32_t)(*addr - value) >= 0 */
#define CU_STREAM_WRITE_VALUE_DEFAULT 0x0 /* after the stream's earlier writes are visible */
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02

/* virtual memory management (cuMemCreate and its kin) */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READ 0x1
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0

struct kg_cu_mem_location {
	int type; /* CU_MEM_LOCATION_TYPE_* */
	int id;
};

/* cuda.h's CUmemAllocationProp (v1) */
struct kg_cu_alloc_prop {
	int type; /* CU_MEM_ALLOCATION_TYPE_* */
	int requested_handle_types; /* CU_MEM_HANDLE_TYPE_* */
	struct kg_cu_mem_location location;
	void *win32_meta; /* zero */
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

/* cuda.h's CUmemAccessDesc (v1) */
struct kg_cu_access_desc {
	struct kg_cu_mem_location location;
	int flags; /* CU_MEM_ACCESS_FLAGS_* */
};

/* One driver entry point a table resolves: its name, and where its pointer goes in the caller's
 * table of function pointers. */
struct kg_cu_sym {
	const char *name;
	size_t off;
};
/* Each symbol from lib (dlopen'd libcuda) stored at its offset in api, NULL where the driver lacks
 * it; returns the name of the first of the leading n_required that is missing, else NULL. */
const char *kg_cu_resolve(void *lib, const struct kg_cu_sym *syms, size_t n, size_t n_required, void *api);

#endif

/* Helper for sandbox_cuda: a miniature runner. It creates a CUDA context, applies the filter its
 * spawn spec describes with the driver's fds (as kgate-run does), then allocates, copies, JIT-loads
 * and launches a kernel, and optionally misbehaves afterwards. libcuda is loaded with dlopen:
 * nothing here needs the CUDA toolkit to build. Usage: cuda-probe [socket|procmem] */
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/sandbox.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static const char ptx[] = ".version 7.0\n.target sm_50\n.address_size 64\n"
			  ".visible .entry add1(.param .u64 p, .param .u32 n) {\n"
			  " .reg .b32 %r<5>; .reg .b64 %rd<5>; .reg .pred %p1; .reg .f32 %f<3>;\n"
			  " ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [n];\n"
			  " mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mov.u32 %r4, %tid.x;\n"
			  " mad.lo.s32 %r2, %r2, %r3, %r4; setp.ge.s32 %p1, %r2, %r1; @%p1 bra DONE;\n"
			  " cvta.to.global.u64 %rd2, %rd1; mul.wide.s32 %rd3, %r2, 4; add.s64 %rd4, %rd2, %rd3;\n"
			  " ld.global.f32 %f1, [%rd4]; add.f32 %f2, %f1, 0f3F800000; st.global.f32 [%rd4], %f2;\n"
			  "DONE: ret; }\n";

static void *lib;

static void *sym(const char *name)
{
	void *f = dlsym(lib, name);
	if (!f) {
		printf("PROBE missing %s\n", name);
		exit(2);
	}
	return f;
}

#define CK(call)                                                                                   \
	do {                                                                                       \
		CUresult r_ = (call);                                                              \
		if (r_) {                                                                          \
			printf("PROBE %s failed: %d\n", #call, r_);                                \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (!(lib = dlopen("libcuda.so.1", RTLD_NOW))) {
		printf("PROBE no libcuda: %s\n", dlerror());
		return 77;
	}
	CUresult (*init)(unsigned) = (CUresult(*)(unsigned))sym("cuInit");
	CUresult (*dev_get)(int *, int) = (CUresult(*)(int *, int))sym("cuDeviceGet");
	CUresult (*retain)(void **, int) = (CUresult(*)(void **, int))sym("cuDevicePrimaryCtxRetain");
	CUresult (*release)(int) = (CUresult(*)(int))sym("cuDevicePrimaryCtxRelease_v2");
	CUresult (*set_current)(void *) = (CUresult(*)(void *))sym("cuCtxSetCurrent");
	CUresult (*mem_alloc)(CUdeviceptr *, size_t) = (CUresult(*)(CUdeviceptr *, size_t))sym("cuMemAlloc_v2");
	CUresult (*htod)(CUdeviceptr, const void *, size_t) =
		(CUresult(*)(CUdeviceptr, const void *, size_t))sym("cuMemcpyHtoD_v2");
	CUresult (*dtoh)(void *, CUdeviceptr, size_t) = (CUresult(*)(void *, CUdeviceptr, size_t))sym("cuMemcpyDtoH_v2");
	CUresult (*load)(void **, const void *) = (CUresult(*)(void **, const void *))sym("cuModuleLoadData");
	CUresult (*get_fn)(void **, void *, const char *) =
		(CUresult(*)(void **, void *, const char *))sym("cuModuleGetFunction");
	CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *,
			   void **, void **) = (CUresult(*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
							    unsigned, unsigned, void *, void **, void **))sym("cuLaunchKernel");
	CUresult (*sync)(void) = (CUresult(*)(void))sym("cuCtxSynchronize");

	int dev;
	void *ctx;
	CK(init(0));
	CK(dev_get(&dev, 0));
	CK(retain(&ctx, dev));
	CK(set_current(ctx));

	/* the driver's fds, found the way a runner would: everything open on /dev/nvidia* */
	int fds[64], n = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	while (d && (de = readdir(d)) && n < 64) {
		char path[64], target[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		ssize_t k = readlink(path, target, sizeof(target) - 1);
		if (k > 0 && (target[k] = '\0', !strncmp(target, "/dev/nvidia", 11)))
			fds[n++] = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	/* the rest of the filter (threads, extra calls, read-only opens) comes from the spec */
	struct kg_sb_filter_opts o = {.ioctl_fds = fds, .n_ioctl_fds = n};
	kg_error e = {0};
	if (kg_sb_seccomp_apply(&o, &e)) {
		printf("PROBE apply failed: %s\n", e.msg);
		return 3;
	}

	float h[256];
	for (int i = 0; i < 256; i++)
		h[i] = (float)i;
	CUdeviceptr buf;
	void *mod, *fn;
	unsigned count = 256;
	void *args[] = {&buf, &count};
	CK(mem_alloc(&buf, sizeof(h)));
	CK(htod(buf, h, sizeof(h)));
	CK(load(&mod, ptx));
	CK(get_fn(&fn, mod, "add1"));
	CK(launch(fn, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
	CK(sync());
	CK(dtoh(h, buf, sizeof(h)));
	printf("PROBE kernel %s\n", h[5] == 6.0f ? "ok" : "wrong");

	if (argc > 1 && !strcmp(argv[1], "socket"))
		socket(AF_INET, SOCK_STREAM, 0);
	if (argc > 1 && !strcmp(argv[1], "procmem"))
		open("/proc/self/mem", O_RDWR);
	CK(release(dev));
	printf("PROBE done\n");
	return 0;
}

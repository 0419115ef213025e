/* GPU discovery through the driver API, loaded at run time, in a short-lived child process: cuInit
 * reserves a huge virtual address range, which kgate itself must never carry (its sandboxed
 * children share its address space until exec and get an address-space limit). Only device
 * attributes are read; contexts are created in the sandboxed runners. */
#include "verifier/plan/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_count_t)(int *);
typedef int (*cu_get_t)(int *, int);
typedef int (*cu_name_t)(char *, int, int);
typedef int (*cu_attr_t)(int *, int, int);
typedef int (*cu_mem_t)(size_t *, int);
typedef int (*cu_errstr_t)(int, const char **);

#define CU_ATTR_SM_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76

static void probe_here(struct kg_gpu_info *g)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(g->why, sizeof(g->why), "libcuda.so.1 not loadable (no NVIDIA driver)");
		return;
	}
	cu_init_t init = (cu_init_t)dlsym(h, "cuInit");
	cu_count_t count = (cu_count_t)dlsym(h, "cuDeviceGetCount");
	cu_get_t get = (cu_get_t)dlsym(h, "cuDeviceGet");
	cu_name_t name = (cu_name_t)dlsym(h, "cuDeviceGetName");
	cu_attr_t attr = (cu_attr_t)dlsym(h, "cuDeviceGetAttribute");
	cu_mem_t mem = (cu_mem_t)dlsym(h, "cuDeviceTotalMem_v2");
	cu_errstr_t errstr = (cu_errstr_t)dlsym(h, "cuGetErrorString");
	int n = 0, dev = 0, rc;
	if (!init || !count || !get || !name || !attr) {
		snprintf(g->why, sizeof(g->why), "libcuda lacks the driver API entry points");
		goto out;
	}
	if ((rc = init(0)) || (rc = count(&n)) || n < 1 || (rc = get(&dev, 0))) {
		const char *s = NULL;
		if (rc && errstr)
			errstr(rc, &s);
		snprintf(g->why, sizeof(g->why), "%s", n < 1 && !rc ? "no CUDA device" : s ? s : "cuInit failed");
		goto out;
	}
	name(g->name, sizeof(g->name), dev);
	attr(&g->cc_major, CU_ATTR_CC_MAJOR, dev);
	attr(&g->cc_minor, CU_ATTR_CC_MINOR, dev);
	attr(&g->sm_count, CU_ATTR_SM_COUNT, dev);
	size_t bytes = 0;
	if (mem && !mem(&bytes, dev))
		g->mem_bytes = (long long)bytes;
	/* Hopper gets the arch-specific target so wgmma and setmaxnreg are available. */
	snprintf(g->arch, sizeof(g->arch), "%d%d%s", g->cc_major, g->cc_minor, g->cc_major == 9 ? "a" : "");
	g->present = 1;
out:
	/* The handle stays open: unloading libcuda after cuInit is not supported by the driver. */
	(void)h;
}

void kg_gpu_probe(struct kg_gpu_info *g)
{
	memset(g, 0, sizeof(*g));
	const char *force = getenv("KGATE_NO_GPU");
	if (force && *force && strcmp(force, "0")) {
		snprintf(g->why, sizeof(g->why), "KGATE_NO_GPU is set");
		return;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(g->why, sizeof(g->why), "pipe: %s", strerror(errno));
		return;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(g->why, sizeof(g->why), "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return;
	}
	if (pid == 0) {
		struct kg_gpu_info mine;
		memset(&mine, 0, sizeof(mine));
		close(p[0]);
		probe_here(&mine);
		ssize_t n = write(p[1], &mine, sizeof(mine));
		_exit(n == (ssize_t)sizeof(mine) ? 0 : 1);
	}
	close(p[1]);
	ssize_t n;
	do
		n = read(p[0], g, sizeof(*g));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*g)) {
		memset(g, 0, sizeof(*g));
		snprintf(g->why, sizeof(g->why), "the GPU probe process failed");
	}
	g->why[sizeof(g->why) - 1] = '\0';
	g->name[sizeof(g->name) - 1] = '\0';
	g->arch[sizeof(g->arch) - 1] = '\0';
}

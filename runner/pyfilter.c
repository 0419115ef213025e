/* libkgate-filter.so: the run profile's seccomp filter for a Python runner on a device
 * (runner/torch_device.py loads it with ctypes). The sandbox starts such a runner with only its
 * baseline deny filter (seccomp_deferred), because the CUDA driver's device nodes are opened only
 * once the interpreter has initialised CUDA, and the filter allows ioctl by fd: the runner calls
 * kg_pyfilter_apply once CUDA is up and before it loads anything of a candidate's, exactly as
 * kgate-run's CUDA backend does in C (runner/main.c). The filter itself is the one the spawn spec
 * described (KGATE_SB_FILTER); only the fds come from here. The parent checks from outside that it
 * is in place (/proc/PID/status), so a runner that skipped this call runs nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "runner/backend.h"
#include "sandbox/sandbox.h"

int kg_pyfilter_apply(char *err, size_t errsz) __attribute__((visibility("default")));

int kg_pyfilter_apply(char *err, size_t errsz)
{
	if (!getenv(KG_SB_ENV_NOTIFY_FD) || !getenv(KG_SB_ENV_FILTER)) {
		snprintf(err, errsz, "not in a sandbox that left its filter to the program");
		return -EINVAL;
	}
	int fds[64];
	int n = kg_runner_fds_to("/dev/nvidia", fds, 64);
	struct kg_sb_filter_opts fo = {.ioctl_fds = fds, .n_ioctl_fds = n > 0 ? n : 0};
	kg_error e = {0};
	int rc = kg_sb_seccomp_apply(&fo, &e);
	if (rc)
		snprintf(err, errsz, "%s", e.msg);
	return rc;
}

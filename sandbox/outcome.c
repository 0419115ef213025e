/* How a sandboxed program ended: reaping it (through its pid-namespace init when there is one),
 * classifying the end from what the supervisor recorded and the wait status, and releasing
 * everything a child holds. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sb_int.h"

static void classify(struct kg_sb_child *c, int status, const struct rusage *ru)
{
	struct kg_sb_outcome *o = &c->oc;
	o->syscall_nr = -1;
	o->end = c->why;
	if (c->why != KG_SB_END_RUNNING) {
		o->syscall_nr = c->why == KG_SB_END_SYSCALL || c->why == KG_SB_END_MEMORY ? c->why_nr : -1;
		if (o->syscall_nr >= 0)
			snprintf(o->syscall, sizeof(o->syscall), "%s", c->why_syscall);
		snprintf(o->detail, sizeof(o->detail), "%s", c->why_detail);
		return;
	}
	long ooms = sb_cgroup_oom_kills(&c->cg);
	double cpu = (double)ru->ru_utime.tv_sec + (double)ru->ru_stime.tv_sec +
		     ((double)ru->ru_utime.tv_usec + (double)ru->ru_stime.tv_usec) / 1e6;
	if (ooms > 0) {
		o->end = KG_SB_END_MEMORY;
		snprintf(o->detail, sizeof(o->detail), "cgroup memory.max of %" PRIu64 " bytes reached (%ld oom kills)",
			 (uint64_t)c->plan.lim.mem_bytes, ooms);
	} else if (WIFEXITED(status)) {
		o->end = KG_SB_END_EXIT;
		o->exit_code = WEXITSTATUS(status);
	} else if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		if (sig == SIGSYS) {
			o->end = KG_SB_END_SYSCALL;
			snprintf(o->detail, sizeof(o->detail), "killed by SIGSYS (seccomp, call not known)");
		} else if (sig == SIGXCPU || (sig == SIGKILL && cpu >= c->plan.lim.cpu_s)) {
			o->end = KG_SB_END_TIMEOUT;
			snprintf(o->detail, sizeof(o->detail), "CPU time limit of %u s exceeded", c->plan.lim.cpu_s);
		} else {
			o->end = KG_SB_END_SIGNAL;
			o->signo = sig;
			sb_signame(sig, o->detail, sizeof(o->detail));
		}
	}
}

void sb_reap(struct kg_sb_child *c)
{
	int status = 0;
	struct rusage ru;
	memset(&ru, 0, sizeof(ru));
	while (wait4(c->pid, &status, 0, &ru) < 0) {
		if (errno != EINTR) {
			status = W_EXITCODE(0, SIGKILL);
			break;
		}
	}
	c->reaped = 1;
	c->status = status;
	if (!c->end_ns)
		c->end_ns = kg_now_ns();
	if (c->pidns_init && c->status_r >= 0) {
		/* The program's own status and usage, as its init saw them; absent when we killed
		 * init. Init's own rusage would be useless anyway: it shares our memory. */
		struct sb_exit ex;
		if (read(c->status_r, &ex, sizeof(ex)) == (ssize_t)sizeof(ex)) {
			c->status = status = ex.status;
			ru = ex.ru;
		} else {
			ru.ru_maxrss = 0;
		}
	}
	memset(&c->oc, 0, sizeof(c->oc));
	classify(c, status, &ru);
	sb_cgroup_destroy(&c->cg);
	sb_drain_output(c);
	c->oc.layers_active = c->active;
	c->oc.denials_named = c->had_listener;
	c->oc.layers_failed = c->failed;
	c->oc.output = c->out;
	c->oc.output_len = c->out_len;
	c->oc.output_total = c->out_total;
	c->oc.wall_s = (double)(c->end_ns - c->start_ns) / 1e9;
	c->oc.maxrss_kb = ru.ru_maxrss;
	c->oc.mem_peak = c->mem.peak;
}

int kg_sb_wait(struct kg_sb_child *c, struct kg_sb_outcome *o)
{
	if (!c)
		return -EINVAL;
	while (!c->reaped && !c->exited) {
		int r = kg_sb_wait_fd(c, -1, -1);
		if (r < 0 && r != -EINTR) {
			/* poll itself failed: do not leave the child running unsupervised */
			c->killed = 1;
			sb_kill_tree(c);
			break;
		}
	}
	if (!c->reaped)
		sb_reap(c);
	if (o)
		*o = c->oc;
	return 0;
}

pid_t kg_sb_pid(const struct kg_sb_child *c)
{
	return c ? c->pid : -1;
}

unsigned kg_sb_layers_active(const struct kg_sb_child *c)
{
	return c ? c->active : 0;
}

const char *kg_sb_notes(const struct kg_sb_child *c)
{
	return c ? c->notes : "";
}

void kg_sb_free(struct kg_sb_child *c)
{
	if (!c)
		return;
	if (c->pid > 0 && !c->reaped) {
		if (!c->exited) {
			c->killed = 1;
			sb_set_why(c, KG_SB_END_KILLED, "freed while running");
			sb_kill_tree(c);
		}
		kg_sb_wait(c, NULL);
	}
	sb_cgroup_destroy(&c->cg);
	sb_mem_free(&c->mem);
	sb_close_fd(&c->pidfd);
	sb_close_fd(&c->err_r);
	sb_close_fd(&c->out_r);
	sb_close_fd(&c->notify_p);
	sb_close_fd(&c->status_r);
	sb_close_fd(&c->devnull_w);
	while (c->n_listeners)
		sb_drop_listener(c, c->n_listeners - 1);
	struct sb_plan *p = &c->plan;
	int *plan_fds[] = {&c->ce.err_w, &c->ce.sync_r, &c->ce.out_w, &c->ce.notify_c, &c->ce.status_w,
		&c->ce.bpf_fd, &c->ce.stdin_fd};
	for (size_t i = 0; i < KG_ARRAY_LEN(plan_fds); i++)
		sb_close_fd(plan_fds[i]);
	sb_mounts_free(p);
	free(p->envp);
	if (p->nocaps)
		cap_free(p->nocaps);
	sb_unmap_exec_gate(p);
	if (p->initcaps)
		cap_free(p->initcaps);
	if (p->stacks)
		munmap(p->stacks, 2 * (p->stack_sz + 4096));
	if (c->req)
		seccomp_notify_free(c->req, c->resp);
	free(c->out);
	free(c);
}


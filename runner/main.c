/* kgate-run: hosts one candidate or reference inside the sandbox. Before anything untrusted
 * exists in it, it maps the arena (a paged one laid out and sealed in full), initialises its
 * backend, seals its own image and measurement state, applies the seccomp filter, seals the thread
 * that serves the parent (no opens, no new code, no file mappings) and restricts the thread that
 * will load the .so; only then does it say HELLO. The .so's constructors run on that loader
 * thread, which must be gone once LOAD is answered (the parent counts the threads from outside).
 * It obeys the parent's commands (runner/wire.h); nothing it says is trusted, and it has no
 * signal handler: a fault ends the process, and the parent names it from the wait status. */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <kgate/kernel.h>

#include "runner/arena.h"
#include "runner/backend.h"
#include "runner/wire.h"
#include "sandbox/sandbox.h"

typedef int (*kg_forward_fn)(const kg_tensor *, int, kg_tensor *, int, void *);

struct call {
	struct kg_rbackend *b;
	const struct kg_wire_tensor *t; /* RUN's descriptors: a batch's calls build theirs from them */
	uint32_t sets;
	uint64_t stride;
	kg_forward_fn fwd;
	kg_forward_fn terms; /* kg_error_terms, where the library exports one (a task's reference) */
	kg_forward_fn entry; /* the one this RUN calls */
	kg_tensor *in, *out; /* n_in and n_out of them (SETUP's table), at least one each */
	int n_in, n_out;
	void *stream;
	int rc;
	/* a gated call (runner/wire.h): set k's token is gate + k (0: not gated); gate_failed: a
	 * mark could not be queued */
	uint32_t gate;
	int gate_failed;
};

/* A gated call's marks around set k: its release awaited on the stream before its work (ARMED
 * stored once the first wait is queued: kgate-device starts the clock then), DONE after it. */
static int gate_before(struct call *c, uint32_t k)
{
	if (!c->gate)
		return 0;
	if (c->b->gate_wait(c->b, c->gate + k, k == 0)) {
		c->gate_failed = 1;
		return -1;
	}
	if (k == 0)
		c->b->gate_arm(c->b, c->gate);
	return 0;
}

static int gate_after(struct call *c, uint32_t k)
{
	if (c->gate && c->b->gate_done(c->b, c->gate + k)) {
		c->gate_failed = 1;
		return -1;
	}
	return 0;
}

/* The untrusted .so is loaded on a thread of its own, started before any filter: its constructors
 * run there, restricted (kg_sb_seal_loader), while this thread (which serves the parent and calls
 * kg_forward) sealed itself before HELLO (kg_sb_seal_calls), a seal that nothing on the loader
 * thread can lift. */
struct loader {
	pthread_t tid;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state; /* 0 idle, 4 asked to restrict itself, 5 restricted, 1 asked to load, 2 done */
	int seal_rc;
	pid_t os_tid;
	const char *path;
	void *handle;
	char err[300];
};

static void *loader_main(void *arg)
{
	struct loader *l = arg;
	pthread_mutex_lock(&l->mu);
	l->os_tid = gettid();
	while (l->state != 4)
		pthread_cond_wait(&l->cv, &l->mu);
	kg_error se = {0};
	l->seal_rc = kg_sb_seal_loader(&se);
	if (l->seal_rc)
		snprintf(l->err, sizeof(l->err), "restricting the loader thread: %s", se.msg);
	l->state = 5;
	pthread_cond_broadcast(&l->cv);
	while (l->state == 5 && !l->seal_rc)
		pthread_cond_wait(&l->cv, &l->mu);
	if (l->state == 1) {
		l->handle = dlopen(l->path, RTLD_NOW | RTLD_LOCAL);
		if (!l->handle)
			snprintf(l->err, sizeof(l->err), "%s", dlerror());
		l->state = 2;
		pthread_cond_broadcast(&l->cv);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

static struct loader loader = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static int loader_up;

/* Asks the loader thread to restrict itself (after the process's filter), and waits for it. */
static int loader_restrict(char *err, size_t errsz)
{
	pthread_mutex_lock(&loader.mu);
	loader.state = 4;
	pthread_cond_broadcast(&loader.cv);
	while (loader.state == 4)
		pthread_cond_wait(&loader.cv, &loader.mu);
	int rc = loader.seal_rc;
	if (rc)
		snprintf(err, errsz, "%s", loader.err);
	pthread_mutex_unlock(&loader.mu);
	return rc;
}

/* dlopen on the loader thread (or here, where there is none); NULL with err filled on failure. */
static void *load_so(const char *path, char *err, size_t errsz)
{
	if (!loader_up) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(err, errsz, "%s", dlerror());
		return h;
	}
	pthread_mutex_lock(&loader.mu);
	loader.path = path;
	loader.state = 1;
	pthread_cond_broadcast(&loader.cv);
	while (loader.state != 2)
		pthread_cond_wait(&loader.cv, &loader.mu);
	pthread_mutex_unlock(&loader.mu);
	pthread_join(loader.tid, NULL);
	loader_up = 0;
	snprintf(err, errsz, "%s", loader.err);
	return loader.handle;
}

/* RUN before LOAD: the parent calibrates the channel and the launch on a call that does nothing
 * (gated: each set's marks and nothing between them), before any untrusted code exists in this
 * process. */
static void call_nothing(void *arg)
{
	struct call *c = arg;
	for (uint32_t k = 0; k < c->sets && !gate_before(c, k) && !gate_after(c, k); k++)
		;
}

static void call_forward(void *arg)
{
	struct call *c = arg;
	if (gate_before(c, 0))
		return;
	c->rc = c->entry(c->in, c->n_in, c->out, c->n_out, c->stream);
	gate_after(c, 0);
}

static void fill_tensor(struct kg_rbackend *b, kg_tensor *t, const struct kg_wire_tensor *w);

/* A batch: each set's call on its own tensors, back to back on the stream; the first failure is
 * the batch's. */
static void call_batch(void *arg)
{
	struct call *c = arg;
	int rc = 0;
	for (uint32_t k = 0; k < c->sets; k++) {
		for (int i = 0; i < c->n_in + c->n_out; i++) {
			struct kg_wire_tensor w = c->t[i];
			w.offset += k * c->stride;
			fill_tensor(c->b, i < c->n_in ? &c->in[i] : &c->out[i - c->n_in], &w);
		}
		if (gate_before(c, k))
			break;
		int one = c->entry(c->in, c->n_in, c->out, c->n_out, c->stream);
		if (one && !rc)
			rc = one;
		if (gate_after(c, k))
			break;
	}
	c->rc = rc;
}

static int send_reply(int fd, struct kg_wire_reply *r)
{
	r->magic = KG_WIRE_MAGIC;
	ssize_t n;
	do
		n = send(fd, r, sizeof(*r), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof(*r) ? 0 : -1;
}

static void fill_tensor(struct kg_rbackend *b, kg_tensor *t, const struct kg_wire_tensor *w)
{
	memset(t, 0, sizeof(*t));
	t->data = b->ptr(b, w->offset);
	t->dtype = w->dtype;
	t->ndim = w->ndim;
	int64_t stride = 1;
	for (int d = w->ndim - 1; d >= 0; d--) {
		t->shape[d] = w->shape[d];
		t->stride[d] = stride;
		stride *= w->shape[d];
	}
}

static struct kg_rarena rarena; /* the parent's arena as mapped here (runner/arena.h) */

/* The tensor tables as read at start (--tables FD), before anything untrusted ran here. */
static unsigned char *tables;
static size_t tables_len;

/* Reads the whole tables file into memory of this process's own; the fd is closed after. */
static int read_tables(int fd, char *err, size_t errsz)
{
	struct stat st;
	if (fstat(fd, &st) || st.st_size <= 0 || (uint64_t)st.st_size > SIZE_MAX / 2) {
		snprintf(err, errsz, "no tensor tables on fd %d", fd);
		return -1;
	}
	tables_len = (size_t)st.st_size;
	if (!(tables = malloc(tables_len))) {
		snprintf(err, errsz, "no memory for the tensor tables (%zu bytes)", tables_len);
		return -1;
	}
	for (size_t at = 0; at < tables_len;) {
		ssize_t n = pread(fd, tables + at, tables_len - at, (off_t)at);
		if (n <= 0) {
			snprintf(err, errsz, "reading the tensor tables: %s", n ? strerror(errno) : "short file");
			return -1;
		}
		at += (size_t)n;
	}
	close(fd);
	return 0;
}

/* SETUP: its table, checked (runner/table.c), and the call's descriptors sized for it. */
static int setup_table(const struct kg_wire_cmd *c, size_t arena_size, struct call *call, const struct kg_wire_tensor **t,
		       char *err, size_t errsz)
{
	if (c->arena_size > arena_size) {
		snprintf(err, errsz, "bad SETUP record (%llu bytes in use, the arena has %zu)",
			 (unsigned long long)c->arena_size, arena_size);
		return -1;
	}
	if (kg_wire_table_get(tables, tables_len, c->table, c->n_in, c->n_out, arena_size, t, err, errsz))
		return -1;
	kg_tensor *in = calloc(c->n_in ? c->n_in : 1, sizeof(kg_tensor));
	kg_tensor *out = calloc(c->n_out ? c->n_out : 1, sizeof(kg_tensor));
	if (!in || !out) {
		free(in);
		free(out);
		snprintf(err, errsz, "no memory for %u tensors' descriptors", c->n_in + c->n_out);
		return -1;
	}
	free(call->in);
	free(call->out);
	call->in = in;
	call->out = out;
	call->n_in = (int)c->n_in;
	call->n_out = (int)c->n_out;
	return 0;
}

/* every set's tensors inside the arena */
static int batch_ok(const struct kg_wire_cmd *c, const struct kg_wire_tensor *t, int n, size_t arena_size)
{
	if (c->sets > 1024 || !c->stride || !arena_size || c->stride > arena_size / (c->sets - 1))
		return 0;
	uint64_t last = (uint64_t)(c->sets - 1) * c->stride;
	for (int i = 0; i < n; i++)
		if (t[i].offset >= arena_size - last)
			return 0;
	return 1;
}

/* A RUN's gate (its token) and sets, where this runner has a gate page; 1 when they may run. */
static int gate_ok(const struct kg_wire_cmd *c, int gated, struct kg_wire_reply *r)
{
	if (c->gate && !gated) {
		r->status = KG_WS_ERROR;
		snprintf(r->msg, sizeof(r->msg), "RUN: a gated call, and this runner has no gate page");
		return 0;
	}
	return 1;
}

/* dev_size: the device arena kgate-device exported, where a batch's sets lie (0: none); gated:
 * the backend took a gate page (--gate) */
static int serve(int ctl, struct kg_rbackend *b, size_t arena_size, size_t dev_size, int sealed, int gated)
{
	struct call call = {0};
	const struct kg_wire_tensor *table = NULL; /* the current SETUP's, in the tables' copy */
	void *handle = NULL;
	size_t in_use = 0;
	int loads = 0;
	for (;;) {
		struct kg_wire_cmd cmd;
		ssize_t n = recv(ctl, &cmd, sizeof(cmd), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			return 0; /* parent went away */
		if (n != (ssize_t)sizeof(cmd) || cmd.magic != KG_WIRE_MAGIC)
			return 2;
		struct kg_wire_reply r = {.op = cmd.op, .seq = cmd.seq};
		switch (cmd.op) {
		case KG_OP_LOAD: {
			cmd.path[sizeof(cmd.path) - 1] = '\0';
			loads++;
			char why[300];
			handle = loads == 1 ? load_so(cmd.path, why, sizeof(why)) : NULL;
			if (!handle) {
				r.status = KG_WS_ERROR;
				snprintf(r.msg, sizeof(r.msg), "dlopen: %s", loads == 1 ? why : "one LOAD per runner");
				break;
			}
			const int *abi = dlsym(handle, "kg_abi_version");
			call.fwd = (kg_forward_fn)dlsym(handle, "kg_forward");
			call.terms = (kg_forward_fn)dlsym(handle, "kg_error_terms");
			if (!abi || *abi != KG_ABI_VERSION) {
				r.status = KG_WS_ABI;
				snprintf(r.msg, sizeof(r.msg), abi ? "kg_abi_version is %d, kgate speaks %d"
								   : "kg_abi_version is not exported (use KG_CANDIDATE;)",
					 abi ? *abi : 0, KG_ABI_VERSION);
			} else if (!call.fwd) {
				r.status = KG_WS_NOSYM;
				snprintf(r.msg, sizeof(r.msg), "kg_forward is not exported");
			} else {
				r.info = (uint64_t)sealed; /* the parent's cue for sandbox.dlopen */
			}
			break;
		}
		case KG_OP_SETUP:
			table = NULL;
			if (setup_table(&cmd, arena_size, &call, &table, r.msg, sizeof(r.msg))) {
				r.status = KG_WS_ERROR;
				break;
			}
			in_use = cmd.arena_size;
			/* paged arena: laid out and sealed at start; nothing is mapped here */
			if (kg_rarena_check(&rarena, table, call.n_in + call.n_out, r.msg, sizeof(r.msg)))
				r.status = KG_WS_ERROR;
			else if (b->setup && b->setup(b, table, call.n_in + call.n_out, call.n_in, r.msg, sizeof(r.msg)))
				r.status = KG_WS_CUDA;
			if (r.status)
				table = NULL;
			break;
		case KG_OP_UPLOAD:
			if (b->upload(b, in_use, r.msg, sizeof(r.msg)))
				r.status = KG_WS_CUDA;
			break;
		case KG_OP_RUN:
			if (!gate_ok(&cmd, gated, &r))
				break;
			call.b = b;
			call.gate = cmd.gate;
			call.gate_failed = 0;
			if (!loads) {
				call.stream = b->stream(b);
				call.sets = cmd.sets > 1 && cmd.sets <= 1024 ? cmd.sets : 1;
				if (b->run(b, call_nothing, &call, &r, r.msg, sizeof(r.msg)))
					r.status = KG_WS_CUDA;
				else if (call.gate_failed)
					r.status = KG_WS_CUDA, snprintf(r.msg, sizeof(r.msg), "queueing the call's gate marks failed");
				break;
			}
			if (!call.fwd || !table) {
				r.status = KG_WS_ERROR;
				snprintf(r.msg, sizeof(r.msg), "RUN before a successful %s", call.fwd ? "SETUP" : "LOAD");
				break;
			}
			call.entry = cmd.entry == KG_ENTRY_FORWARD ? call.fwd : cmd.entry == KG_ENTRY_TERMS ? call.terms : NULL;
			if (!call.entry) {
				r.status = KG_WS_NOSYM;
				if (cmd.entry == KG_ENTRY_TERMS)
					snprintf(r.msg, sizeof(r.msg), "kg_error_terms is not exported");
				else
					snprintf(r.msg, sizeof(r.msg), "unknown entry %u", cmd.entry);
				break;
			}
			/* Descriptors are rebuilt for every call: the candidate may have scribbled on the
			 * previous ones. */
			for (int i = 0; i < call.n_in; i++)
				fill_tensor(b, &call.in[i], &table[i]);
			for (int i = 0; i < call.n_out; i++)
				fill_tensor(b, &call.out[i], &table[call.n_in + i]);
			call.stream = b->stream(b);
			call.rc = -1;
			call.t = table;
			call.sets = cmd.sets > 1 ? cmd.sets : 1;
			call.stride = cmd.stride;
			if (call.sets > 1 && !batch_ok(&cmd, table, call.n_in + call.n_out, dev_size)) {
				r.status = KG_WS_ERROR;
				snprintf(r.msg, sizeof(r.msg), "RUN: %u sets of %llu bytes outside the arena", cmd.sets,
					 (unsigned long long)cmd.stride);
				break;
			}
			if (b->run(b, call.sets > 1 ? call_batch : call_forward, &call, &r, r.msg, sizeof(r.msg)))
				r.status = KG_WS_CUDA;
			else if (call.gate_failed)
				r.status = KG_WS_CUDA, snprintf(r.msg, sizeof(r.msg), "queueing the call's gate marks failed");
			r.rc = call.rc;
			break;
		case KG_OP_DOWNLOAD:
			if (b->download(b, in_use, r.msg, sizeof(r.msg)))
				r.status = KG_WS_CUDA;
			break;
		case KG_OP_SETTLE:
			if (b->settle(b, cmd.delay_ms, in_use, r.msg, sizeof(r.msg)))
				r.status = KG_WS_CUDA;
			break;
		case KG_OP_NOP:
			break;
		case KG_OP_QUIT:
			send_reply(ctl, &r);
			return 0;
		default:
			r.status = KG_WS_ERROR;
			snprintf(r.msg, sizeof(r.msg), "unknown op %u", cmd.op);
		}
		if (send_reply(ctl, &r))
			return 3;
	}
	(void)handle; /* stays loaded until exit: unloading would run candidate destructors mid-protocol */
}

static void usage(void)
{
	fprintf(stderr, "usage: kgate-run --backend NAME --tables FD [--exact-buffers] [--tool-sockets]\n"
			"                 [--device-arena BYTES [--gate]]\n"
			"  (started by kgate inside its sandbox; fd 3 is the control socket, fd 4 the arena, fd 5 a\n"
			"  device runner's gate page, FD the tensor tables)\n");
}

/* The runner's backends, by the names of the verifier's backend table (kg_vocab.h); a build
 * without a backend's libraries has none of that name. */
static struct kg_rbackend *find_backend(const char *name)
{
	struct kg_rbackend *const all[] = {kg_rbackend_cpu(), kg_rbackend_cuda()};
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i] && !strcmp(all[i]->name, name))
			return all[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const char *backend = "cpu";
	int exact = 0, tool_sockets = 0, gate = 0;
	unsigned long long device_bytes = 0;
	int tables_fd = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--backend") && i + 1 < argc) {
			backend = argv[++i];
		} else if (!strcmp(argv[i], "--tables") && i + 1 < argc) {
			char *end = NULL;
			long fd = strtol(argv[++i], &end, 10);
			if (!end || *end || fd < 3 || fd > 64) {
				usage();
				return 2;
			}
			tables_fd = (int)fd;
		} else if (!strcmp(argv[i], "--exact-buffers")) {
			exact = 1;
		} else if (!strcmp(argv[i], "--tool-sockets")) {
			tool_sockets = 1;
		} else if (!strcmp(argv[i], "--gate")) {
			gate = 1;
		} else if (!strcmp(argv[i], "--device-arena") && i + 1 < argc) {
			char *end = NULL;
			device_bytes = strtoull(argv[++i], &end, 10);
			if (!end || *end || !device_bytes) {
				usage();
				return 2;
			}
		} else {
			usage();
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);

	struct kg_rbackend *b = find_backend(backend);
	struct kg_wire_reply hello = {.op = KG_OP_HELLO};
	int ctl = KG_WIRE_CTL_FD;
	if (!b) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "backend '%s' is not available in this build", backend);
		goto fail;
	}
	b->exact = exact;
	if (device_bytes && (!b->device || exact)) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "--device-arena is for a device backend's verified runs only");
		goto fail;
	}
	if (gate && (!device_bytes || !b->gate_wait)) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "--gate is for a device backend with --device-arena only");
		goto fail;
	}
	b->gate_fd = gate ? KG_WIRE_GATE_FD : -1;
	if (device_bytes) {
		/* fd 4 is kgate-device's allocation: no host arena here at all, so nothing in this
		 * process can touch what kgate judges by */
		b->device_fd = KG_WIRE_ARENA_FD;
		b->device_bytes = (size_t)device_bytes;
		rarena.size = (size_t)device_bytes;
	} else if (kg_rarena_map(&rarena, tables_fd, hello.msg, sizeof(hello.msg))) {
		hello.status = KG_WS_ERROR;
		goto fail;
	}
	if (tables_fd < 0 || read_tables(tables_fd, hello.msg, sizeof(hello.msg))) {
		hello.status = KG_WS_ERROR;
		if (tables_fd < 0)
			snprintf(hello.msg, sizeof(hello.msg), "no --tables FD (the tensor tables)");
		goto fail;
	}
	if (b->init(b, rarena.base, rarena.size, hello.msg, sizeof(hello.msg))) {
		hello.status = b->device ? KG_WS_CUDA : KG_WS_ERROR;
		goto fail;
	}
	/* glibc reads the CPU count from /sys the first time a ninth thread wants a malloc arena of its
	 * own (its arena limit, 8 per CPU): an open that the seal below would end the process for (an
	 * honest kernel of twelve threads, or the matmul reference on 16 cores). The limit it would
	 * compute is set now, while opens are allowed. */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	mallopt(M_ARENA_MAX, (int)(8 * (ncpu > 0 && ncpu < 4096 ? ncpu : 1)));
	/* Sealed before the filter (which has no mseal) and before anything untrusted exists here:
	 * the backend's pages, then every loaded object's code, read-only data and GOT. */
	kg_error se = {0};
	if (kg_sb_seal_memory(b->sealed, b->sealed_len, PROT_READ, &se) || kg_sb_seal_image(&se)) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "sealing the runner: %s", se.msg);
		goto fail;
	}
	int filtered = getenv(KG_SB_ENV_NOTIFY_FD) != NULL;
	/* A tool's injected library (compute-sanitizer) keeps working after load: its runs are
	 * checked for memory errors only, never timed, and every other run is sealed. */
	int seal = filtered && !tool_sockets;
	if (seal && pthread_create(&loader.tid, NULL, loader_main, &loader)) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "cannot start the loader thread");
		goto fail;
	}
	loader_up = seal;
	if (filtered) {
		int fds[64], tool[16];
		int nfds = b->driver_fds(b, fds, 64);
		/* Under compute-sanitizer the tool's injected library connected its sockets before
		 * main; the filter must let them carry messages, or its first report is a denial. */
		int ntool = tool_sockets ? kg_runner_fds_to("socket:", tool, 16) : 0;
		/* The filter itself (profile, threads, memory bound, extra calls) is what the spawn
		 * spec described (KG_SB_ENV_FILTER); only the runner knows these fds. */
		struct kg_sb_filter_opts fo = {
			.ioctl_fds = fds, .n_ioctl_fds = nfds > 0 ? nfds : 0,
			.msg_fds = tool, .n_msg_fds = ntool,
		};
		kg_error e = {0};
		if (kg_sb_seccomp_apply(&fo, &e)) {
			hello.status = KG_WS_ERROR;
			snprintf(hello.msg, sizeof(hello.msg), "seccomp: %s", e.msg);
			goto fail;
		}
	}
	/* This thread runs the candidate: no opens, no new code and (a host arena, mapped in full
	 * already) no file mappings from here on; the loader thread may still map the .so, but
	 * nothing else becomes code and no file is written. Both before HELLO: once the parent has
	 * it, it refuses every filter (kg_sb_distrust). */
	if (seal && loader_restrict(hello.msg, sizeof(hello.msg))) {
		hello.status = KG_WS_ERROR;
		goto fail;
	}
	if (seal && kg_sb_seal_calls(b->device ? 0 : KG_SB_SEAL_NO_FILE_MAPS, &se)) {
		hello.status = KG_WS_ERROR;
		snprintf(hello.msg, sizeof(hello.msg), "sealing the runner's calls: %s", se.msg);
		goto fail;
	}
	hello.info = b->ceiling_mbps;
	hello.tid = seal ? (uint32_t)loader.os_tid : 0;
	int gated = gate && b->gate_ok;
	hello.flags = gated ? KG_HELLO_GATED : 0;
	if (send_reply(ctl, &hello))
		return 3;
	return serve(ctl, b, rarena.size, b->device && !exact ? device_bytes : 0, seal, gated);
fail:
	send_reply(ctl, &hello);
	return 1;
}

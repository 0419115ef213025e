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
 * no runner maps.
 * A gated call (wire.h's gate page) is queued whole at START on the slot's own stream: it waits for
 * the runner's ARMED, starts the clock, and for each set copies its inputs, flushes (timed: the
 * quiet-device probe), releases the set, waits for the runner's DONE and snapshots the set's
 * outputs; END only waits for that queue to finish, or marks what never came itself and says so. */
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

#include <stdint.h>

#include "kg_common.h"
#include "kg_cudrv.h"
#include "device/judge.h"
#include "device/stage.h"
#include "device/wire.h"

#include "device/keeper_int.h"

static int send_reply(int fd, struct kg_dev_reply *r, int pass_fd)
{
	r->magic = KG_DEV_MAGIC;
	return kg_send_fd(fd, r, sizeof(*r), pass_fd) == (ssize_t)sizeof(*r) ? 0 : -1;
}

static volatile uint32_t *gate_word(const struct slot *s, uint32_t off)
{
	return s->gate_host + off / 4;
}

/* A gated call whose marks did not all come: the keeper stores them itself (from the CPU, into the
 * page the device polls), so that its queue runs through, snapshotting what the mirror holds. */
static void gate_force(struct slot *s)
{
	uint32_t last = s->gate_tok + (s->gate_sets ? s->gate_sets - 1 : 0);
	__atomic_store_n(gate_word(s, KG_DEV_GATE_ARMED), last, __ATOMIC_RELEASE);
	__atomic_store_n(gate_word(s, KG_DEV_GATE_DONE), last, __ATOMIC_RELEASE);
}

/* Whatever a gated call left queued on the slot's streams, seen through (forced where its marks
 * never came): before the slot's next call, or the keeper's end. */
static void gate_drain(struct slot *s)
{
	if (!s->gate_open)
		return;
	gate_force(s);
	kg_dev.cu.stream_synchronize(s->gstream);
	kg_dev.cu.stream_synchronize(s->pstream);
	s->gate_open = 0;
	s->probing = 0;
}

/* GATE: the slot's gate page, mapped here and registered for the device, and the slot's streams. */
static int do_gate(const struct kg_dev_cmd *c, int fd, struct kg_dev_reply *r)
{
	struct stat st;
	if (c->slot >= KG_DEV_MAX_SLOTS || !kg_dev.slot[c->slot].used || fd < 0 || fstat(fd, &st) ||
	    st.st_size < (off_t)KG_DEV_GATE_BYTES) {
		snprintf(r->msg, sizeof(r->msg), "GATE without a slot or a page of %u bytes", KG_DEV_GATE_BYTES);
		return r->status = -EINVAL;
	}
	if (!(kg_dev.caps & KG_DEV_CAP_GATE)) {
		snprintf(r->msg, sizeof(r->msg), "gated calls do not work on this device (stream memory operations)");
		return r->status = -ENOTSUP;
	}
	struct slot *s = &kg_dev.slot[c->slot];
	if (s->gate_host) {
		snprintf(r->msg, sizeof(r->msg), "the slot has its gate page already");
		return r->status = -EEXIST;
	}
	void *p = mmap(NULL, KG_DEV_GATE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		snprintf(r->msg, sizeof(r->msg), "mapping the gate page: %s", strerror(errno));
		return r->status = -errno;
	}
	CUdeviceptr d = 0;
	if (kg_dev.cu.host_register(p, KG_DEV_GATE_BYTES, CU_MEMHOSTREGISTER_DEVICEMAP) ||
	    kg_dev.cu.host_device_ptr(&d, p, 0)) {
		munmap(p, KG_DEV_GATE_BYTES);
		snprintf(r->msg, sizeof(r->msg), "registering the gate page for the device failed");
		return r->status = -EIO;
	}
	if ((!s->gstream && kg_dev.cu.stream_create(&s->gstream, CU_STREAM_NON_BLOCKING)) ||
	    (!s->pstream && kg_dev.cu.stream_create(&s->pstream, CU_STREAM_NON_BLOCKING))) {
		snprintf(r->msg, sizeof(r->msg), "creating the slot's streams failed");
		return r->status = -EIO;
	}
	s->gate_host = p;
	s->gate_dev = d;
	s->tok = __atomic_load_n((volatile uint32_t *)p + KG_DEV_GATE_DONE / 4, __ATOMIC_ACQUIRE);
	return 0;
}

static int do_attach(const struct kg_dev_cmd *c, int host_fd, struct kg_dev_reply *r, int *out_fd)
{
	int i = 0;
	while (i < KG_DEV_MAX_SLOTS && kg_dev.slot[i].used)
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
	struct slot *s = &kg_dev.slot[i];
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
	if (!(kg_dev.caps & KG_DEV_CAP_CHECK))
		kg_dev.cu.host_register(s->host, s->host_bytes, 0);
	/* room for a batched call's sets where kgate asks for it (wire.h) */
	uint64_t want = c->bytes;
	if (c->sets > 1 && c->sets <= KG_DEV_MAX_SETS && c->stride >= c->bytes && c->stride <= UINT64_MAX / c->sets)
		want = (uint64_t)c->sets * c->stride;
	s->dev_bytes = (want + kg_dev.gran - 1) / kg_dev.gran * kg_dev.gran;
	if (kg_dev_vmm_alloc(s->dev_bytes, &s->mirror, out_fd, r))
		return r->status;
	CU_OK(kg_dev.cu.mem_alloc(&s->priv, s->dev_bytes), "cuMemAlloc (the private staging and snapshot buffer)");
	s->used = 1;
	r->slot = (uint32_t)i;
	r->dev_bytes = s->dev_bytes;
	return 0;
}

/* EXPORT: the slot's mirror exported again. kgate asks only once the slot's runner is gone (its
 * process reaped, its context with it); the next runner's calls start with a START as any do. */
static int do_export(const struct kg_dev_cmd *c, struct kg_dev_reply *r, int *out_fd)
{
	if (c->slot >= KG_DEV_MAX_SLOTS || !kg_dev.slot[c->slot].used) {
		snprintf(r->msg, sizeof(r->msg), "bad EXPORT record");
		return r->status = -EINVAL;
	}
	if (!kg_dev.cu.retain_handle || !kg_dev.cu.mem_release) {
		snprintf(r->msg, sizeof(r->msg), "this driver cannot export an arena again (no cuMemRetainAllocationHandle)");
		return r->status = -ENOSYS;
	}
	struct slot *s = &kg_dev.slot[c->slot];
	CUmemGenericAllocationHandle h = 0;
	CU_OK(kg_dev.cu.retain_handle(&h, (void *)(uintptr_t)s->mirror), "cuMemRetainAllocationHandle");
	CUresult rc = kg_dev.cu.mem_export(out_fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
	kg_dev.cu.mem_release(h); /* the mapping and the new fd hold it */
	if (rc)
		return kg_dev_cu_fail(rc, "cuMemExportToShareableHandle (again)", r);
	r->slot = c->slot;
	r->dev_bytes = s->dev_bytes;
	return 0;
}

static struct slot *slot_of(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	if (c->slot >= KG_DEV_MAX_SLOTS || !kg_dev.slot[c->slot].used || c->bytes > kg_dev.slot[c->slot].host_bytes ||
	    c->out_lo > c->out_hi || c->out_hi > c->bytes) {
		snprintf(r->msg, sizeof(r->msg), "bad %s record", kg_dev_op_name(c->op));
		r->status = -EINVAL;
		return NULL;
	}
	return &kg_dev.slot[c->slot];
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
		if (!(kg_dev.caps & KG_DEV_CAP_GEN)) {
			snprintf(r->msg, sizeof(r->msg), "a GEN range, and this keeper has no kernels");
			return r->status = -ENOTSUP;
		}
		struct kg_gen_args a = {.t = g->gen, .z = kg_dev.zig, .dst = d, .stride = c->stride};
		memcpy(a.key, c->key, sizeof(a.key));
		uint64_t groups = (g->gen.n + 7) / 8, blocks = (groups + 255) / 256, most = (uint64_t)kg_dev.sms * 64;
		if (x->sets > 1 && most > 8) /* the sets share the device */
			most = most / x->sets > 8 ? most / x->sets : 8;
		void *params[] = {&a};
		CU_OK(kg_dev.cu.launch_kernel(kg_dev.gen_fill, (unsigned)(blocks < most ? blocks : most), x->sets, 1, 256, 1, 1, 0,
					 kg_dev.stream, params, NULL),
		      "drawing an input on the device");
		return 0;
	}
	if (g->kind == KG_DEV_R_SLOT) {
		for (uint32_t set = 0; set < x->sets; set++)
			CU_OK(kg_dev.cu.memcpy_dtod_async(d + set * c->stride, kg_dev.slot[c->src_slot].priv + g->off + set * c->stride,
						     g->bytes, kg_dev.stream),
			      "staging an input from the reference's copy");
		return 0;
	}
	uint64_t n = g->bytes / g->elem;
	if (g->elem == 1)
		CU_OK(kg_dev.cu.memset_d8_async(d, (unsigned char)g->pattern, n, kg_dev.stream), "poisoning an output");
	else if (g->elem == 2)
		CU_OK(kg_dev.cu.memset_d16_async(d, (unsigned short)g->pattern, n, kg_dev.stream), "poisoning an output");
	else if (g->elem == 4)
		CU_OK(kg_dev.cu.memset_d32_async(d, (unsigned)g->pattern, n, kg_dev.stream), "poisoning an output");
	else { /* 8 bytes: each half as a column of a pitched 2-D memset */
		CU_OK(kg_dev.cu.memset_d2d32_async(d, 8, (unsigned)g->pattern, 1, n, kg_dev.stream), "poisoning an output");
		CU_OK(kg_dev.cu.memset_d2d32_async(d + 4, 8, (unsigned)(g->pattern >> 32), 1, n, kg_dev.stream),
		      "poisoning an output");
	}
	return 0;
}

static int stage_host(void *arg, uint64_t off, uint64_t n)
{
	struct stage_ctx *x = arg;
	struct kg_dev_reply *r = x->r;
	CU_OK(kg_dev.cu.memcpy_htod_async(x->s->priv + off, x->s->host + off, n, kg_dev.stream), "staging the call's inputs");
	return 0;
}

/* [0, n) of each of a batch's sets (its slot's stride apart), from src to dst, on the keeper's
 * stream: a copy a set where they are few, one kernel where they are many (each copy's own cost
 * would be charged inside the span). */
static int copy_sets_of(uint64_t stride, CUdeviceptr dst, CUdeviceptr src, uint64_t n, uint32_t sets,
			struct kg_dev_reply *r)
{
	int wide = !(dst % 16) && !(src % 16) && !(n % 16) && !(stride % 16);
	void *fn = wide ? kg_dev.copy_sets : kg_dev.copy_sets_b;
	if (sets > 4 && n < (1u << 20) && fn) { /* many small sets; large ones go at the copy engine's rate */
		unsigned long long w = n, st = stride, ns = sets, items = (wide ? n / 16 : n) * sets;
		unsigned long long blocks = (items + 255) / 256, most = (unsigned long long)kg_dev.sms * 32;
		void *params[] = {&dst, &src, &w, &st, &ns};
		CU_OK(kg_dev.cu.launch_kernel(fn, (unsigned)(blocks < most ? blocks : most), 1, 1, 256, 1, 1, 0, kg_dev.stream, params,
					 NULL),
		      "copying a batch's sets");
		return 0;
	}
	for (uint32_t set = 0; set < sets; set++)
		CU_OK(kg_dev.cu.memcpy_dtod_async(dst + set * stride, src + set * stride, n, kg_dev.stream), "copying a batch's sets");
	return 0;
}

/* The gated call's steps, queued on the slot's stream (wire.h's gate page): ARMED awaited, the clock
 * started, then for each set its inputs onto the mirror (a lone call: the whole image), the flush
 * between two events, the set released, its DONE awaited and its outputs snapshotted; the clock
 * stopped. Nothing of it waits on the host: START answers at once with the call's first token. With
 * a probe, a stream of its own waits for the first release, lets probe_ns pass in copies of that
 * length, and captures the probe's ranges of the mirror. */
static int start_gated(struct slot *s, const struct kg_dev_cmd *c, uint64_t extent, uint32_t sets, struct kg_dev_reply *r)
{
	CUstream st = s->gstream;
	uint32_t tok = s->tok + 1;
	uint64_t n = c->bytes ? extent : s->dev_bytes < 4096 ? s->dev_bytes : 4096;
	/* each set's inputs (a batch: from the first input's 16 bytes to the last's, as in an
	 * ungated batch; with no inputs, a page, as the calibration copies) */
	uint64_t lo = UINT64_MAX, hi = 0;
	for (uint32_t i = 0; i < c->n_ranges; i++)
		if (c->range[i].kind != KG_DEV_R_FILL) {
			lo = c->range[i].off < lo ? c->range[i].off : lo;
			hi = c->range[i].off + c->range[i].bytes > hi ? c->range[i].off + c->range[i].bytes : hi;
		}
	if (lo == UINT64_MAX)
		lo = 0, hi = c->bytes ? 0 : n;
	lo = lo / 16 * 16;
	hi = (hi + 15) / 16 * 16 < (sets > 1 ? c->stride : n) ? (hi + 15) / 16 * 16 : (sets > 1 ? c->stride : n);
	/* each set's snapshot: its outputs, or a page where there are none (the calibration) */
	uint64_t olo = c->out_hi > c->out_lo ? c->out_lo : 0;
	uint64_t on = c->out_hi > c->out_lo ? c->out_hi - c->out_lo : s->dev_bytes < 4096 ? s->dev_bytes : 4096;
	s->snap_lo = olo;
	s->snap_hi = olo + on;
	s->snap_ok = 0; /* judged only once END has seen the queue through */
	s->snap_sets = sets;
	CU_OK(kg_dev.cu.wait_value32(st, s->gate_dev + KG_DEV_GATE_ARMED, tok, CU_STREAM_WAIT_VALUE_GEQ), "waiting for the runner");
	CU_OK(kg_dev.cu.event_record(s->go, st), "cuEventRecord");
	s->went = 1;
	for (uint32_t k = 0; k < sets; k++) {
		uint64_t at = (uint64_t)k * (sets > 1 ? c->stride : 0);
		if (sets == 1)
			CU_OK(kg_dev.cu.memcpy_dtod_async(s->mirror, s->priv, n, st), "copying the call's inputs onto the device arena");
		else if (hi > lo)
			CU_OK(kg_dev.cu.memcpy_dtod_async(s->mirror + at + lo, s->priv + at + lo, hi - lo, st), "copying a set's inputs");
		if (c->flush) {
			CU_OK(kg_dev.cu.event_record(s->fl0[k], st), "cuEventRecord");
			if (kg_dev_flush_on(st, r))
				return r->status;
			CU_OK(kg_dev.cu.event_record(s->fl1[k], st), "cuEventRecord");
		}
		CU_OK(kg_dev.cu.write_value32(st, s->gate_dev + KG_DEV_GATE_RELEASED, tok + k, CU_STREAM_WRITE_VALUE_DEFAULT),
		      "releasing a set");
		CU_OK(kg_dev.cu.wait_value32(st, s->gate_dev + KG_DEV_GATE_DONE, tok + k, CU_STREAM_WAIT_VALUE_GEQ),
		      "waiting for a set's end");
		CU_OK(kg_dev.cu.memcpy_dtod_async(s->priv + at + olo, s->mirror + at + olo, on, st), "the outputs' snapshot");
	}
	CU_OK(kg_dev.cu.event_record(s->got, st), "cuEventRecord");
	s->tok = tok + sets - 1;
	s->gate_tok = tok;
	s->gate_sets = sets;
	s->gate_open = 1;
	s->flushed = c->flush != 0;
	s->probing = 0;
	if (c->probe_ns && (c->probe_bytes[0] || c->probe_bytes[1])) {
		CUstream ps = s->pstream;
		CU_OK(kg_dev.cu.wait_value32(ps, s->gate_dev + KG_DEV_GATE_RELEASED, tok, CU_STREAM_WAIT_VALUE_GEQ), "the probe's wait");
		/* probe_ns of copies at the measured rate (read and written: half of it each way),
		 * within the flush buffer, whose contents are nobody's */
		uint64_t d = (uint64_t)((double)c->probe_ns * (double)kg_dev.ceiling_mbps / 2000.0), chunk = kg_dev.flush_bytes / 2;
		for (int i = 0; d && chunk && i < 4096; i++) {
			uint64_t m = d < chunk ? d : chunk;
			CU_OK(kg_dev.cu.memcpy_dtod_async(kg_dev.flush + chunk, kg_dev.flush, m, ps), "the probe's delay");
			d -= m;
		}
		/* the ranges one after the other in the capture buffer */
		for (int i = 0; i < 2; i++) {
			s->probe_off[i] = c->probe_off[i];
			s->probe_bytes[i] = c->probe_bytes[i];
			if (c->probe_bytes[i])
				CU_OK(kg_dev.cu.memcpy_dtod_async(kg_dev.probe_buf + (i ? c->probe_bytes[0] : 0), s->mirror + c->probe_off[i],
							     c->probe_bytes[i], ps),
				      "the mid-call probe");
		}
		s->probing = 1;
	}
	r->gate_tok = tok;
	r->t_ns = kg_now_ns();
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
	if (c->src_slot < KG_DEV_MAX_SLOTS && kg_dev.slot[c->src_slot].used && &kg_dev.slot[c->src_slot] != s) {
		const struct slot *f = &kg_dev.slot[c->src_slot];
		/* a batched call's SLOT ranges read every set of the source: its last START's layout */
		struct kg_stage_book fb = {.staged = f->staged, .snap_lo = f->snap_lo, .snap_hi = f->snap_hi,
					   .stride = f->stride, .sets = f->sets, .snap_sets = f->snap_sets};
		src = kg_stage_src_of(&fb, sets, c->stride);
	}
	uint64_t extent = c->bytes;
	if (sets > 1) {
		uint32_t need = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | KG_DEV_CAP_CHECK;
		if ((kg_dev.caps & need) != need || sets > KG_DEV_MAX_SETS || c->stride < c->bytes || c->stride % 16 ||
		    c->stride > (s->dev_bytes - c->bytes) / (sets - 1)) {
			snprintf(r->msg, sizeof(r->msg), "bad START: %u sets of %llu bytes do not fit", sets,
				 (unsigned long long)c->stride);
			return r->status = -EINVAL;
		}
		extent = (uint64_t)(sets - 1) * c->stride + c->bytes;
	}
	char why[240];
	if (!kg_stage_valid(c, &src, why, sizeof(why))) {
		snprintf(r->msg, sizeof(r->msg), "bad START ranges: %s", why);
		return r->status = -EINVAL;
	}
	if (c->gate && !kg_stage_gate_valid(c, s->gate_host != NULL, sets)) {
		snprintf(r->msg, sizeof(r->msg), "bad gated START (%u sets, outputs [%llu, %llu), probe %llu+%llu, %llu+%llu)",
			 sets, (unsigned long long)c->out_lo, (unsigned long long)c->out_hi, (unsigned long long)c->probe_off[0],
			 (unsigned long long)c->probe_bytes[0], (unsigned long long)c->probe_off[1],
			 (unsigned long long)c->probe_bytes[1]);
		return r->status = -EINVAL;
	}
	/* a gated call the last END did not see through (its runner failed): its queue forced now */
	gate_drain(s);
	r->mem_free = kg_dev_mem_free(); /* before anything of this call's: kgate's memory count */
	s->flushed = 0;
	/* nothing of the last call's image is valid from here on, whatever fails part way */
	s->staged = s->snap_lo = s->snap_hi = 0;
	s->snap_ok = s->went = 0;
	s->sets = sets;
	s->snap_sets = 0;
	s->stride = sets > 1 ? c->stride : 0;
	struct stage_ctx sc = {s, c, r, 1, sets > 1};
	if (kg_stage_walk(c, stage_host, stage_range, &sc))
		return r->status;
	if (sets > 1 && c->bytes) {
		/* set 0's image (host bytes and patterns) copied to the others, doubling, then each
		 * set's own draws and sources (a batch of no bytes is the gated calibration's) */
		for (uint32_t have = 1; have < sets;) {
			uint32_t n = have < sets - have ? have : sets - have;
			CU_OK(kg_dev.cu.memcpy_dtod_async(s->priv + (uint64_t)have * c->stride, s->priv,
						     (uint64_t)(n - 1) * c->stride + c->bytes, kg_dev.stream),
			      "copying a batched call's sets");
			have += n;
		}
		/* Every set's image onto the mirror before the clock, but for the inputs, which are
		 * drawn only now: their regions there hold what the last call staged (seen by the
		 * candidate then). Only the inputs' copy is inside the span. */
		CU_OK(kg_dev.cu.memcpy_dtod_async(s->mirror, s->priv, extent, kg_dev.stream), "copying a batched call's sets");
		sc.sets = sets;
		sc.deferred = 0;
		for (uint32_t i = 0; i < c->n_ranges; i++)
			if (c->range[i].kind != KG_DEV_R_FILL && stage_range(&sc, &c->range[i]))
				return r->status;
	}
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "staging the call's inputs (sync)");
	s->staged = extent;
	/* Whatever the candidate's context set aside or windowed as persisting since the last call:
	 * demoted, and the set-aside taken back, before the flush evicts the L2. */
	if (kg_dev.cu.reset_persisting_l2)
		kg_dev.cu.reset_persisting_l2();
	if (kg_dev.cu.ctx_set_limit)
		kg_dev.cu.ctx_set_limit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0);
	if (c->gate)
		return start_gated(s, c, extent, sets, r);
	r->t_ns = kg_now_ns();
	/* with nothing to copy (the calibration) a page all the same: the device switches to this
	 * context for it, as it does in every call */
	size_t n = c->bytes ? extent : s->dev_bytes < 4096 ? s->dev_bytes : 4096;
	CU_OK(kg_dev.cu.event_record(s->go, kg_dev.stream), "cuEventRecord");
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
		CU_OK(kg_dev.cu.memcpy_dtod_async(s->mirror, s->priv, n, kg_dev.stream), "copying the call's inputs onto the device arena");
	}
	if (c->flush) {
		CU_OK(kg_dev.cu.event_record(s->fl0[0], kg_dev.stream), "cuEventRecord");
		if (kg_dev_flush_on(kg_dev.stream, r))
			return r->status;
		CU_OK(kg_dev.cu.event_record(s->fl1[0], kg_dev.stream), "cuEventRecord");
	}
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "copying the call's inputs (sync)");
	float ms = 0;
	s->flushed = c->flush && !kg_dev.cu.event_elapsed(&ms, s->fl0[0], s->fl1[0]);
	s->flush_ns = s->flushed ? (uint64_t)((double)ms * 1e6) : 0;
	return 0;
}

/* The first of `words` 8-byte words in which x and y differ, by kg_first_diff (*first ~0: none). */
static int first_diff(CUdeviceptr x, CUdeviceptr y, unsigned long long words, unsigned long long *first,
		      struct kg_dev_reply *r)
{
	unsigned long long most = (unsigned long long)kg_dev.sms * 32, blocks = (words + 255) / 256;
	CUdeviceptr w = kg_dev.diff_word;
	void *params[] = {&x, &y, &words, &w};
	*first = ~0ull;
	CU_OK(kg_dev.cu.memset_d32_async(kg_dev.diff_word, 0xffffffffu, 2, kg_dev.stream), "comparing the inputs");
	CU_OK(kg_dev.cu.launch_kernel(kg_dev.first_diff, (unsigned)(blocks < most ? blocks : most), 1, 1, 256, 1, 1, 0, kg_dev.stream,
				 params, NULL),
	      "comparing the inputs");
	CU_OK(kg_dev.cu.memcpy_dtoh_async(first, kg_dev.diff_word, 8, kg_dev.stream), "comparing the inputs");
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "comparing the inputs (sync)");
	return 0;
}

/* The mirror's [0, hi) against the private copy (what START staged, and END's snapshot over it)
 * by kg_first_diff: r's in_state and in_diff. */
static int image_compare(struct slot *s, uint64_t hi, struct kg_dev_reply *r)
{
	unsigned long long first;
	if (first_diff(s->mirror, s->priv, (hi + 7) / 8, &first, r))
		return r->status;
	r->in_state = first == ~0ull ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
	r->in_diff = first == ~0ull ? 0 : first * 8;
	return 0;
}

/* The mid-call probe's capture (the mirror's probe ranges as they were at its moment) against
 * what START staged there: r's probe_state and probe_diff (an arena offset). */
static int probe_compare(struct slot *s, struct kg_dev_reply *r)
{
	r->probe_state = KG_DEV_IN_UNCHECKED;
	if (!s->probing)
		return 0;
	s->probing = 0;
	CU_OK(kg_dev.cu.stream_synchronize(s->pstream), "the mid-call probe (sync)");
	r->probe_state = KG_DEV_IN_SAME;
	for (int i = 0; i < 2; i++) {
		unsigned long long first;
		if (!s->probe_bytes[i])
			continue;
		if (first_diff(kg_dev.probe_buf + (i ? s->probe_bytes[0] : 0), s->priv + s->probe_off[i], s->probe_bytes[i] / 8, &first, r))
			return r->status;
		if (first != ~0ull) {
			r->probe_state = KG_DEV_IN_DIFFERS;
			r->probe_diff = s->probe_off[i] + first * 8;
			return 0;
		}
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The flush before each set's release, on its events: the median and the most (0: none timed). */
static void flush_times(const struct slot *s, uint32_t sets, struct kg_dev_reply *r)
{
	uint64_t t[KG_DEV_MAX_GATED_SETS];
	uint32_t n = 0;
	for (uint32_t k = 0; s->flushed && k < sets && k < KG_DEV_MAX_GATED_SETS; k++) {
		float ms = 0;
		if (!kg_dev.cu.event_elapsed(&ms, s->fl0[k], s->fl1[k]) && ms > 0)
			t[n++] = (uint64_t)((double)ms * 1e6);
	}
	if (!n)
		return;
	qsort(t, n, sizeof(t[0]), cmp_u64);
	r->flush_ns = t[n / 2];
	r->flush_max_ns = t[n - 1];
}

/* END's and SETTLE's look at [0, in_hi) (below the outputs): the mirror against what START staged
 * there, by kg_first_diff; *from is where the host arena's refresh starts (in_hi when the same). */
static int inputs_compare(struct slot *s, const struct kg_dev_cmd *c, uint64_t hi, int look, uint64_t *from,
			  struct kg_dev_reply *r)
{
	*from = 0;
	r->in_state = KG_DEV_IN_UNCHECKED;
	if (!hi || !(kg_dev.caps & KG_DEV_CAP_CMP))
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
		CU_OK(kg_dev.cu.memcpy_dtoh_async(s->host + from, s->mirror + from, lo - from, kg_dev.stream), "download");
	if (hi > lo && !keep)
		CU_OK(kg_dev.cu.memcpy_dtoh_async(s->host + lo, s->priv + lo, hi - lo, kg_dev.stream), "download (snapshot)");
	if (bytes > hi)
		CU_OK(kg_dev.cu.memcpy_dtoh_async(s->host + hi, s->mirror + hi, bytes - hi, kg_dev.stream), "download");
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "download (sync)");
	return 0;
}

/* A gated call's END: its queue seen through, within KG_DEV_GATE_GRACE_MS (a runner that answered
 * RUN had marked its sets done before it did, and only the last snapshot can still be under way),
 * else the marks that never came stored by the keeper and named (gate, gate_set). The span is the
 * device's, from ARMED to the last snapshot; the rest is as an ungated END's. */
static int end_gated(struct slot *s, const struct kg_dev_cmd *c, uint32_t sets, struct kg_dev_reply *r)
{
	uint64_t until = kg_now_ns() + (uint64_t)KG_DEV_GATE_GRACE_MS * 1000000u;
	CUresult q;
	while ((q = kg_dev.cu.event_query(s->got)) == CUDA_ERROR_NOT_READY && kg_now_ns() < until) {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
	r->gate = KG_DEV_GATE_OK;
	if (q == CUDA_ERROR_NOT_READY) {
		uint32_t armed = __atomic_load_n(gate_word(s, KG_DEV_GATE_ARMED), __ATOMIC_ACQUIRE);
		uint32_t done = __atomic_load_n(gate_word(s, KG_DEV_GATE_DONE), __ATOMIC_ACQUIRE);
		r->gate = kg_stage_gate_verdict(armed, done, s->gate_tok, s->gate_sets, &r->gate_set);
		/* every mark there and the queue still busy after the grace: the device is held (work
		 * left running); the queue is waited for below, under kgate's own deadline */
		if (r->gate != KG_DEV_GATE_OK)
			gate_force(s);
	} else if (q) {
		gate_force(s);
		return kg_dev_cu_fail(q, "the call's queue", r);
	}
	CU_OK(kg_dev.cu.stream_synchronize(s->gstream), "the call's queue (sync)");
	s->gate_open = 0;
	s->snap_ok = 1;
	r->t_ns = kg_now_ns();
	float ms = 0;
	if (s->went && !kg_dev.cu.event_elapsed(&ms, s->go, s->got) && ms > 0)
		r->dev_ns = (uint64_t)((double)ms * 1e6);
	s->went = 0;
	flush_times(s, s->gate_sets, r);
	if (probe_compare(s, r))
		return r->status;
	if (sets > 1) /* every set's inputs and bands, against START's; nothing sent (none: calibration) */
		return c->bytes ? image_compare(s, s->staged, r) : 0;
	uint64_t from;
	if (inputs_compare(s, c, c->in_hi, 0, &from, r))
		return r->status;
	return download(s, c->bytes, from, s->snap_lo, s->snap_hi > s->snap_lo && c->out_hi > c->out_lo ? s->snap_hi : s->snap_lo,
			c->keep != 0, r);
}

static int do_end(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	uint64_t lo = c->out_lo, hi = c->out_hi;
	uint32_t sets = c->sets > 1 ? c->sets : 1;
	if (sets != (s->sets > 1 ? s->sets : 1) ||
	    (sets > 1 && (c->stride != s->stride || !c->keep || (hi <= lo && !(s->gate_open && !c->bytes)) || hi > c->bytes))) {
		snprintf(r->msg, sizeof(r->msg), "bad END: %u sets, and START staged %u", sets, s->sets);
		return r->status = -EINVAL;
	}
	if (s->gate_open)
		return end_gated(s, c, sets, r);
	r->flush_ns = r->flush_max_ns = s->flushed ? s->flush_ns : 0;
	CU_OK(kg_dev.cu.event_record(kg_dev.ev0, kg_dev.stream), "cuEventRecord");
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
	CU_OK(kg_dev.cu.event_record(kg_dev.ev1, kg_dev.stream), "cuEventRecord");
	CU_OK(kg_dev.cu.event_record(s->got, kg_dev.stream), "cuEventRecord");
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "the outputs' snapshot (sync)");
	s->snap_ok = 1;
	r->t_ns = kg_now_ns();
	float ms = 0;
	if (!kg_dev.cu.event_elapsed(&ms, kg_dev.ev0, kg_dev.ev1))
		r->copy_ns = (uint64_t)((double)ms * 1e6);
	/* The span on the device's own clock: none of the keeper's host-side waits before the copy
	 * began or after the snapshot was complete is in it. */
	if (s->went && !kg_dev.cu.event_elapsed(&ms, s->go, s->got) && ms > 0)
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
	struct kg_judge_args a = {.c = *c, .got = s->priv + c->off, .exp = ref ? ref->priv + c->ref_off : 0, .part = kg_dev.parts};
	a.factor = c->mode == KG_DEV_CHK_COMPARE && c->row && !kg_gen_is_int(c->dtype);
	a.len = a.factor ? c->row : JUDGE_CHUNK;
	a.rows = (c->n + a.len - 1) / a.len;
	a.per = (a.rows + JUDGE_MAX_PARTS - 1) / JUDGE_MAX_PARTS;
	unsigned long long parts = (a.rows + a.per - 1) / a.per;
	void *params[] = {&a};
	CU_OK(kg_dev.cu.launch_kernel(kg_dev.judge, (unsigned)parts, 1, 1, JUDGE_THREADS, 1, 1, 0, kg_dev.stream, params, NULL),
	      "judging an output on the device");
	CU_OK(kg_dev.cu.memcpy_dtoh_async(kg_dev.parts_host, kg_dev.parts, parts * sizeof(struct kg_dev_cmp), kg_dev.stream),
	      "judging an output on the device");
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "judging an output on the device (sync)");
	for (unsigned long long i = 0; i < parts; i++)
		kg_judge_merge(out, &kg_dev.parts_host[i]);
	return 0;
}

/* CHECK: the outputs of the slot's last call judged where they are, against the reference's
 * (src_slot's) last ones: nothing of either crosses the bus but the figures. */
static int do_check(const struct kg_dev_cmd *c, struct kg_dev_reply *r)
{
	struct slot *s = slot_of(c, r);
	if (!s)
		return r->status;
	if (!(kg_dev.caps & KG_DEV_CAP_CHECK) || c->n_checks > KG_DEV_MAX_CHECKS) {
		snprintf(r->msg, sizeof(r->msg), !(kg_dev.caps & KG_DEV_CAP_CHECK) ? "this keeper has no kernels" : "bad CHECK");
		return r->status = !(kg_dev.caps & KG_DEV_CAP_CHECK) ? -ENOTSUP : -EINVAL;
	}
	struct slot *ref = c->src_slot < KG_DEV_MAX_SLOTS && kg_dev.slot[c->src_slot].used && &kg_dev.slot[c->src_slot] != s
				   ? &kg_dev.slot[c->src_slot]
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
	CU_OK(kg_dev.cu.memcpy_dtoh_async(s->host + c->out_lo, s->priv + c->out_lo + at, c->out_hi - c->out_lo, kg_dev.stream), "fetch");
	CU_OK(kg_dev.cu.stream_synchronize(kg_dev.stream), "fetch (sync)");
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
	int rc = kg_dev_init(&hello);
	if (send_reply(ctl, &hello, -1) || rc)
		return 1;
	uint32_t last = 0;
	for (;;) {
		struct kg_dev_cmd c;
		int fd = -1;
		if (last == KG_DEV_START) { /* END comes within an ungated call's span: polled for (wire.h) */
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
			if (!do_end(&c, &r))
				r.mem_free = kg_dev_mem_free(); /* after the call: kgate's memory count */
		} else if (c.op == KG_DEV_SETTLE) {
			do_settle(&c, &r);
		} else if (c.op == KG_DEV_CHECK) {
			do_check(&c, &r);
		} else if (c.op == KG_DEV_FETCH) {
			do_fetch(&c, &r);
		} else if (c.op == KG_DEV_GATE) {
			do_gate(&c, fd, &r);
		} else if (c.op == KG_DEV_MEMINFO) {
			r.mem_free = kg_dev_mem_free();
		} else if (c.op == KG_DEV_EXPORT) {
			do_export(&c, &r, &out_fd);
		} else if (c.op == KG_DEV_QUIT) {
			for (int i = 0; i < KG_DEV_MAX_SLOTS; i++)
				gate_drain(&kg_dev.slot[i]);
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
		last = r.status || (c.op == KG_DEV_START && c.gate) ? 0 : c.op;
	}
}

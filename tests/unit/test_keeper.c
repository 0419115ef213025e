/* Unit tests of kgate's side of the keeper protocol (verifier/session/keeper.c), without a GPU: this program
 * is also the keeper it starts (found at /proc/self/exe, it sees its control socket on fd 3) and
 * then plays one with a host memfd as the "device" arena; and the real kgate-device, on a machine
 * without a driver, must fail its HELLO with a reason. What the fake does is chosen by the
 * command's fields: an ATTACH of 1 byte is answered with a stale reply first, a START of 7 bytes
 * ends the keeper, an END of 8000 bytes finds "the candidate" wrote byte 8 (an input), a SETTLE
 * look after 7 ms finds it wrote byte 4101 (an output) after END, a batched END of 3 sets finds
 * it wrote byte 9 of set 2 (an input of the batch's last call). Its GEN
 * ranges run the generator's core on the host, as kgate-device's kernel runs it on the GPU.
 * Started with CUDA_VISIBLE_DEVICES=kg-fake-gate (the one variable kgate passes on), it has gated
 * calls too: GATE maps the page, a gated START gives the call's tokens, and END reads the marks the
 * test (playing the runner) stored in the page, as kgate-device does once its grace is over, storing
 * what never came itself; a probe_ns of 4242 "catches" byte 16 of the first probe range in use as
 * scratch mid-call (changed at the capture, restored before END). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device/judge.h"
#include "verifier/session/keeper.h"
#include "device/stage.h"
#include "device/wire.h"
#include "verifier/plan/inputs.h"

static int send_rep(int fd, struct kg_dev_reply *r, int pass)
{
	r->magic = KG_DEV_MAGIC;
	return kg_send_fd(fd, r, sizeof(*r), pass) == (ssize_t)sizeof(*r) ? 0 : -1;
}

/* The fake device's staging, through the walk kgate-device uses: host bytes copied, FILL ranges
 * written with their pattern, GEN ranges drawn (SLOT ranges have no second slot here: refused). */
struct fake_stage {
	unsigned char *dev;
	const unsigned char *host;
	const uint32_t *key;
};

static int fake_host(void *arg, uint64_t off, uint64_t n)
{
	struct fake_stage *f = arg;
	memcpy(f->dev + off, f->host + off, n);
	return 0;
}

static int fake_range(void *arg, const struct kg_dev_range *g)
{
	struct fake_stage *f = arg;
	if (g->kind == KG_DEV_R_GEN) {
		kg_gen_range(&g->gen, f->key, kg_inputs_zig(), f->dev + g->off, 0, g->gen.n);
		return 0;
	}
	if (g->kind != KG_DEV_R_FILL)
		return -EINVAL;
	for (uint64_t i = 0; i < g->bytes; i += g->elem)
		memcpy(f->dev + g->off + i, &g->pattern, g->elem); /* little-endian: the low bytes */
	return 0;
}

/* The fake keeper: HELLO, then each command answered as kgate-device would, its "device" a memfd
 * that START fills from the host arena (and its FILL ranges) and END copies back. */
static int fake_keeper(void)
{
	int ctl = KG_DEV_CTL_FD;
	const char *vis = getenv("CUDA_VISIBLE_DEVICES");
	int gates = vis && !strcmp(vis, "kg-fake-gate");
	struct kg_dev_reply hello = {.op = KG_DEV_HELLO,
				     .ceiling_mbps = 1000000,
				     .granularity = 4096,
				     .caps = KG_DEV_CAP_GEN | KG_DEV_CAP_CMP | (gates ? KG_DEV_CAP_GATE : 0),
				     .flush_ns = 30000,
				     .mem_free = 6ull << 30};
	if (send_rep(ctl, &hello, -1))
		return 1;
	unsigned char *host = NULL, *dev = NULL, *staged = NULL;
	uint32_t batch_sets = 1;
	uint64_t batch_stride = 0;
	volatile uint32_t *page = NULL; /* the gate page (GATE) */
	uint32_t tok = 0, gate_tok = 0, gate_sets = 0;
	int gate_open = 0;
	struct kg_dev_cmd started = {0}; /* the last gated START (its probe) */
	for (uint64_t t = 1000;; t += 1000) {
		struct kg_dev_cmd c = {0};
		int fd = -1;
		if (kg_recv_fd(ctl, &c, sizeof(c), &fd) != (ssize_t)sizeof(c))
			return 0;
		struct kg_dev_reply r = {.op = c.op, .seq = c.seq};
		int pass = -1;
		switch (c.op) {
		case KG_DEV_ATTACH: {
			if (c.bytes == 1) {
				struct kg_dev_reply stale = {.op = c.op, .seq = c.seq - 1, .status = -EIO};
				send_rep(ctl, &stale, -1);
			}
			host = mmap(NULL, c.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			pass = memfd_create("fake-device", MFD_CLOEXEC);
			uint64_t size = c.sets > 1 ? c.sets * c.stride : c.bytes;
			if (host == MAP_FAILED || pass < 0 || ftruncate(pass, (off_t)size))
				return 1;
			dev = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, pass, 0);
			free(staged);
			if (!(staged = malloc(size)))
				return 1;
			r.dev_bytes = size;
			r.slot = 2;
			break;
		}
		case KG_DEV_GATE:
			if (!gates || page || fd < 0) {
				r.status = !gates ? -ENOTSUP : -EINVAL;
				break;
			}
			page = mmap(NULL, KG_DEV_GATE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
			if (page == MAP_FAILED)
				return 1;
			break;
		case KG_DEV_MEMINFO:
			r.mem_free = (6ull << 30) - 4096;
			break;
		case KG_DEV_START:
			if (c.bytes == 7)
				return 0;
			if (c.gate) {
				uint32_t sets = c.sets > 1 ? c.sets : 1;
				if (!kg_stage_gate_valid(&c, page != NULL, sets)) {
					r.status = -EINVAL;
					snprintf(r.msg, sizeof(r.msg), "bad gated START");
					break;
				}
				r.gate_tok = gate_tok = tok + 1;
				tok += sets;
				gate_sets = sets;
				gate_open = 1;
				started = c;
			}
			r.mem_free = 6ull << 30;
			char why[240] = "the walk failed";
			if (!kg_stage_valid(&c, NULL, why, sizeof(why)) ||
			    kg_stage_walk(&c, fake_host, fake_range, &(struct fake_stage){dev, host, c.key})) {
				r.status = -EINVAL;
				snprintf(r.msg, sizeof(r.msg), "bad START ranges: %s", why);
			}
			for (uint32_t set = 1; set < c.sets; set++) { /* set 0's image, each set's own draws */
				memcpy(dev + set * c.stride, dev, c.bytes);
				uint32_t key[8];
				kg_gen_set_key(c.key, set, key);
				struct fake_stage fs = {dev + set * c.stride, host, key};
				for (uint32_t i = 0; i < c.n_ranges; i++)
					if (c.range[i].kind == KG_DEV_R_GEN)
						fake_range(&fs, &c.range[i]);
			}
			memcpy(staged, dev, c.sets > 1 ? (c.sets - 1) * c.stride + c.bytes : c.bytes);
			batch_sets = c.sets > 1 ? c.sets : 1;
			batch_stride = c.stride;
			r.t_ns = t;
			break;
		case KG_DEV_END: {
			if (gate_open) { /* the marks "the runner" stored, read once the grace is over */
				uint32_t armed = page[KG_DEV_GATE_ARMED / 4], done = page[KG_DEV_GATE_DONE / 4];
				r.gate = kg_stage_gate_verdict(armed, done, gate_tok, gate_sets, &r.gate_set);
				if (r.gate != KG_DEV_GATE_OK) /* stored by the keeper, so its queue runs through */
					page[KG_DEV_GATE_ARMED / 4] = page[KG_DEV_GATE_DONE / 4] = gate_tok + gate_sets - 1;
				gate_open = 0;
				r.flush_ns = 30000;
				r.flush_max_ns = 31000;
				r.mem_free = (6ull << 30) - 8192;
				if (started.probe_ns && started.probe_bytes[0]) {
					/* the capture: a word in use as scratch at its moment (4242), restored since */
					uint64_t at = started.probe_off[0], k = 0;
					if (started.probe_ns == 4242)
						dev[at + 16] ^= 0x5a;
					while (k < started.probe_bytes[0] && dev[at + k] == staged[at + k])
						k++;
					if (started.probe_ns == 4242)
						dev[at + 16] ^= 0x5a;
					r.probe_state = k == started.probe_bytes[0] ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
					r.probe_diff = at + k / 8 * 8;
				}
				memset(&started, 0, sizeof(started));
			}
			if (c.sets > 1) { /* every set's outputs "written", set 2's input too; the image compared */
				if (c.sets != batch_sets || !c.keep || c.in_hi)
					return 1;
				uint64_t extent = (c.sets - 1) * c.stride + c.bytes, k = 0;
				for (uint32_t set = 0; set < c.sets; set++)
					memset(dev + set * c.stride + c.out_lo, (int)set, c.out_hi - c.out_lo);
				dev[2 * c.stride + 9] ^= 1;
				for (uint32_t set = 0; set < c.sets; set++)
					memcpy(staged + set * c.stride + c.out_lo, dev + set * c.stride + c.out_lo, c.out_hi - c.out_lo);
				while (k < extent && dev[k] == staged[k])
					k++;
				r.in_state = k == extent ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
				r.in_diff = k / 8 * 8;
				r.dev_ns = 1000;
				break;
			}
			dev[c.out_lo] ^= 0xff; /* "the candidate's" write, to be seen in the host arena */
			if (c.bytes == 8000)
				dev[8] ^= 0x01; /* and one to its inputs */
			uint64_t from = 0;
			if (c.in_hi) { /* as kgate-device: compared, and the host's left where the same */
				uint64_t k = 0;
				while (k < c.in_hi && dev[k] == staged[k])
					k++;
				r.in_state = k == c.in_hi ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
				r.in_diff = k / 8 * 8;
				from = k == c.in_hi ? c.in_hi : 0;
			}
			memcpy(staged + c.out_lo, dev + c.out_lo, c.out_hi - c.out_lo); /* the snapshot */
			if (c.keep && from <= c.out_lo) { /* the outputs stay "on the device" */
				memcpy(host + from, dev + from, c.out_lo - from);
				memcpy(host + c.out_hi, dev + c.out_hi, c.bytes - c.out_hi);
			} else {
				memcpy(host + from, dev + from, c.bytes - from);
			}
			r.t_ns = t + 500;
			r.copy_ns = 20;
			r.dev_ns = 450;
			break;
		}
		case KG_DEV_SETTLE: { /* a look only; a delay of 7 ms lets "left-over work" write byte 4101 */
			if (!c.look)
				return 1;
			if (c.delay_ms == 7)
				dev[4101] ^= 0x10;
			uint64_t k = 0;
			while (k < c.bytes && dev[k] == staged[k])
				k++;
			r.in_state = k == c.bytes ? KG_DEV_IN_SAME : KG_DEV_IN_DIFFERS;
			r.in_diff = k / 8 * 8;
			break;
		}
		case KG_DEV_CHECK: /* one slot here: the reference's own figures (STATS) alone */
			for (uint32_t i = 0; i < c.n_checks && i < KG_DEV_MAX_CHECKS; i++) {
				if (c.check[i].mode != KG_DEV_CHK_STATS || !kg_judge_valid(&c.check[i])) {
					r.status = -EINVAL;
					break;
				}
				kg_judge_host(&c.check[i], staged + c.check[i].off, NULL, &r.cmp[i]);
			}
			break;
		case KG_DEV_FETCH:
			if (c.sets >= batch_sets)
				return 1;
			memcpy(host + c.out_lo, staged + c.out_lo + c.sets * batch_stride, c.out_hi - c.out_lo);
			break;
		case KG_DEV_QUIT:
			send_rep(ctl, &r, -1);
			return 0;
		default:
			r.status = -EPROTO;
			snprintf(r.msg, sizeof(r.msg), "unknown op %u", c.op);
		}
		if (fd >= 0)
			close(fd);
		if (send_rep(ctl, &r, pass))
			return 1;
		if (pass >= 0)
			close(pass);
	}
}

static int host_arena(size_t bytes, unsigned char **map)
{
	int fd = memfd_create("host-arena", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	*map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(*map != MAP_FAILED);
	return fd;
}

static void test_call_cycle(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	assert_int_equal(k.ceiling_mbps, 1000000);
	unsigned char *h;
	int hfd = host_arena(8192, &h);
	int slot = -1, dfd = -1;
	size_t dbytes = 0;
	assert_int_equal(kg_keeper_attach(&k, hfd, 8192, 0, 0, &slot, &dfd, &dbytes, &e), 0);
	assert_int_equal(slot, 2);
	assert_int_equal(dbytes, 8192);
	assert_true(dfd >= 0); /* the mirror's fd came back, for the runner */
	unsigned char *d = mmap(NULL, 8192, PROT_READ, MAP_SHARED, dfd, 0);
	assert_true(d != MAP_FAILED);
	h[100] = 42;
	h[4096] = 7;
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed;
	/* an output of 1024 fp32 at 4096 poisoned on the device: the host arena's byte there is not
	 * sent, the bytes around it are */
	struct kg_keeper_stage st = {.n = 1, .range = {{.off = 4096, .bytes = 4096, .pattern = 0x7fc0beefu,
							 .kind = KG_DEV_R_FILL, .elem = 4}}};
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &t0, &e), 0);
	assert_int_equal(d[100], 42); /* the inputs are on the "device" */
	uint32_t w;
	memcpy(&w, d + 4096 + 4 * 1023, 4);
	assert_int_equal(w, 0x7fc0beefu);
	assert_int_equal(d[4096], 0xef);
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 100, 200, 0, 0, &ed, &e), 0);
	assert_int_equal(ed.in_state, KG_DEV_IN_UNCHECKED);
	assert_true(ed.t_ns > t0.t0);
	assert_int_equal(ed.copy_ns, 20);
	assert_int_equal(ed.dev_ns, 450);
	assert_int_equal(h[100], 42 ^ 0xff); /* the host arena holds what the device held */
	munmap(d, 8192);
	munmap(h, 8192);
	close(dfd);
	close(hfd);
	kg_keeper_stop(&k);
	assert_int_equal(k.pid, 0);
}

/* A batched call (wire.h's sets): ATTACH asks room for the sets, START and END carry the sets and
 * their stride, END keeps the outputs and looks at the whole image, whose first change it names
 * (an input of the batch's set 2), and each set's inputs are the draw under that set's key. */
static void test_batch(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	unsigned char *h;
	int hfd = host_arena(8192, &h);
	int slot = -1, dfd = -1;
	size_t dbytes = 0;
	assert_int_equal(kg_keeper_attach(&k, hfd, 8192, 3, 8192, &slot, &dfd, &dbytes, &e), 0);
	assert_int_equal(dbytes, 3 * 8192);
	unsigned char *d = mmap(NULL, dbytes, PROT_READ, MAP_SHARED, dfd, 0);
	assert_true(d != MAP_FAILED);
	kg_key key = {{9, 8, 7, 6, 5, 4, 3, 2}};
	int64_t shape[1] = {1000};
	struct kg_keeper_stage st = {.n = 1, .sets = 3, .stride = 8192, .range = {{.off = 0, .bytes = 4000, .kind = KG_DEV_R_GEN}}};
	kg_inputs_params(&st.range[0].gen, KG_F32, 1000, shape, 1, KG_ROLE_ACTIVATION, KG_CLASS_NORMAL, 0, &key, 0);
	memcpy(st.key, key.w, sizeof(st.key));
	struct kg_keeper_begun t0;
	assert_int_equal(kg_keeper_begin(&k, slot, 6000, 1, &st, &t0, &e), 0);
	float want[1000];
	for (uint32_t set = 0; set < 3; set++) {
		kg_key sk = {{0}};
		kg_gen_set_key(key.w, set, sk.w);
		kg_inputs_fill_tensor(want, &st.range[0].gen, &sk);
		assert_memory_equal(d + set * 8192, want, sizeof(want));
		if (set) /* a set of its own, not the one before it */
			assert_memory_not_equal(d + set * 8192, d + (set - 1) * 8192, sizeof(want));
	}
	struct kg_keeper_ended ed;
	/* keep 0 asked: a batch keeps its outputs all the same, and looks at every set */
	assert_int_equal(kg_keeper_end(&k, slot, 6000, 4096, 6000, 4096, 0, &ed, &e), 0);
	assert_int_equal(ed.in_state, KG_DEV_IN_DIFFERS);
	assert_int_equal(ed.in_diff, 2 * 8192 + 8);
	assert_int_equal(ed.dev_ns, 1000);
	/* a set's outputs fetched into the host arena's one layout */
	assert_int_equal(kg_keeper_fetch_set(&k, slot, 6000, 4096, 6000, 2, &e), 0);
	assert_int_equal(h[4096], 2);
	assert_int_equal(h[5999], 2);
	/* the next call is one call again */
	st.sets = 0;
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &t0, &e), 0);
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 0, 0, &ed, &e), 0);
	assert_int_equal(ed.in_state, KG_DEV_IN_UNCHECKED);
	munmap(d, dbytes);
	munmap(h, 8192);
	close(dfd);
	close(hfd);
	kg_keeper_stop(&k);
}

/* Gated calls (wire.h's gate page): GATE takes the page (refused where the keeper has no gated
 * calls), a gated START gives the call's first token (set k's is tok + k, counting on from the last
 * call's), and END says which of the runner's marks never came, from the words the runner (here,
 * the test) stored: all of them (OK), no ARMED, or the first set without its DONE; what never came
 * is stored by the keeper. The flush's times and the device's free memory come back; MEMINFO reads
 * the free memory alone. */
static void test_gate(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	unsigned char *h;
	int hfd = host_arena(8192, &h);
	int slot = -1, dfd = -1;
	size_t dbytes = 0;
	assert_int_equal(kg_keeper_attach(&k, hfd, 8192, 3, 8192, &slot, &dfd, &dbytes, &e), 0);
	int pfd = memfd_create("gate", MFD_CLOEXEC);
	assert_true(pfd >= 0);
	assert_int_equal(ftruncate(pfd, KG_DEV_GATE_BYTES), 0);
	/* this keeper has no gated calls: refused before anything is sent */
	assert_int_equal(kg_keeper_gate(&k, slot, pfd, &e), -ENOTSUP);
	kg_keeper_stop(&k);
	close(dfd);

	assert_int_equal(setenv("CUDA_VISIBLE_DEVICES", "kg-fake-gate", 1), 0);
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	unsetenv("CUDA_VISIBLE_DEVICES");
	assert_true(k.caps & KG_DEV_CAP_GATE);
	assert_int_equal(k.quiet_flush_ns, 30000);
	assert_int_equal(k.mem_free, 6ull << 30);
	assert_int_equal(kg_keeper_attach(&k, hfd, 8192, 3, 8192, &slot, &dfd, &dbytes, &e), 0);
	/* a gated START before the slot has its page: refused */
	struct kg_keeper_stage st = {.gate = 1, .out_lo = 4096, .out_hi = 6000};
	struct kg_keeper_begun bg;
	assert_int_not_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &bg, &e), 0);
	assert_int_equal(kg_keeper_gate(&k, slot, pfd, &e), 0);
	uint32_t *g = mmap(NULL, KG_DEV_GATE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, pfd, 0);
	assert_true(g != MAP_FAILED);
	struct kg_keeper_ended ed;
	/* every mark: the call's ends as the device saw them */
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &bg, &e), 0);
	assert_int_equal(bg.tok, 1);
	assert_int_equal(bg.mem_free, 6ull << 30);
	g[KG_DEV_GATE_ARMED / 4] = bg.tok;
	g[KG_DEV_GATE_DONE / 4] = bg.tok;
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 0, 0, &ed, &e), 0);
	assert_int_equal(ed.gate, KG_DEV_GATE_OK);
	assert_int_equal(ed.flush_ns, 30000);
	assert_int_equal(ed.flush_max_ns, 31000);
	assert_int_equal(ed.mem_free, (6ull << 30) - 8192);
	assert_int_equal(ed.probe_state, KG_DEV_IN_UNCHECKED);
	/* a runner that answered without arming: named, and ARMED stored by the keeper */
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &bg, &e), 0);
	assert_int_equal(bg.tok, 2);
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 0, 0, &ed, &e), 0);
	assert_int_equal(ed.gate, KG_DEV_GATE_NO_ARM);
	assert_int_equal(g[KG_DEV_GATE_ARMED / 4], 2);
	assert_int_equal(g[KG_DEV_GATE_DONE / 4], 2);
	/* a batch of three whose second set never came: set 1 named, the tokens go on from 3 */
	struct kg_keeper_stage bt = {.gate = 1, .out_lo = 4096, .out_hi = 6000, .sets = 3, .stride = 8192};
	assert_int_equal(kg_keeper_begin(&k, slot, 6000, 1, &bt, &bg, &e), 0);
	assert_int_equal(bg.tok, 3);
	g[KG_DEV_GATE_ARMED / 4] = 3;
	g[KG_DEV_GATE_DONE / 4] = 3;
	assert_int_equal(kg_keeper_end(&k, slot, 6000, 4096, 6000, 0, 1, &ed, &e), 0);
	assert_int_equal(ed.gate, KG_DEV_GATE_NO_DONE);
	assert_int_equal(ed.gate_set, 1);
	assert_int_equal(g[KG_DEV_GATE_DONE / 4], 5);
	/* the mid-call probe: the inputs' range captured while a word of it was in use, restored
	 * by the end (the inputs compare the same at END, the capture does not) */
	struct kg_keeper_stage pr = {.gate = 1, .out_lo = 4096, .out_hi = 6000, .probe_ns = 4242,
				     .probe_off = {0, 6000}, .probe_bytes = {4096, 2192}};
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &pr, &bg, &e), 0);
	g[KG_DEV_GATE_ARMED / 4] = g[KG_DEV_GATE_DONE / 4] = bg.tok;
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 4096, 0, &ed, &e), 0);
	assert_int_equal(ed.gate, KG_DEV_GATE_OK);
	assert_int_equal(ed.in_state, KG_DEV_IN_SAME);
	assert_int_equal(ed.probe_state, KG_DEV_IN_DIFFERS);
	assert_int_equal(ed.probe_diff, 16);
	pr.probe_ns = 1000; /* a capture at a moment of no use */
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &pr, &bg, &e), 0);
	g[KG_DEV_GATE_ARMED / 4] = g[KG_DEV_GATE_DONE / 4] = bg.tok;
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 4096, 0, &ed, &e), 0);
	assert_int_equal(ed.probe_state, KG_DEV_IN_SAME);
	/* a probe range over the outputs is refused, so is a probe of a batch */
	pr.probe_off[1] = 4000;
	assert_int_not_equal(kg_keeper_begin(&k, slot, 8192, 1, &pr, &bg, &e), 0);
	pr.probe_off[1] = 6000;
	pr.sets = 3;
	pr.stride = 8192;
	assert_int_not_equal(kg_keeper_begin(&k, slot, 8192, 1, &pr, &bg, &e), 0);
	uint64_t mf = 0;
	assert_int_equal(kg_keeper_meminfo(&k, &mf, &e), 0);
	assert_int_equal(mf, (6ull << 30) - 4096);
	munmap(g, KG_DEV_GATE_BYTES);
	munmap(h, 8192);
	close(pfd);
	close(dfd);
	close(hfd);
	kg_keeper_stop(&k);
}

/* The gated START's own checks and the verdict on marks that never came, as kgate-device and the
 * fake keeper share them (stage.c): sets within the gated bound, outputs inside the call, probe
 * ranges of a lone call on 8-byte words clear of the outputs and within the capture; the marks
 * compared cyclically, across the 32-bit counter's wrap too. */
static void test_gate_rules(void **state)
{
	(void)state;
	struct kg_dev_cmd c = {.op = KG_DEV_START, .bytes = 8192, .gate = 1, .out_lo = 4096, .out_hi = 6000};
	assert_int_equal(kg_stage_gate_valid(&c, 1, 1), 1);
	assert_int_equal(kg_stage_gate_valid(&c, 0, 1), 0); /* no page */
	assert_int_equal(kg_stage_gate_valid(&c, 1, KG_DEV_MAX_GATED_SETS), 1);
	assert_int_equal(kg_stage_gate_valid(&c, 1, KG_DEV_MAX_GATED_SETS + 1), 0);
	struct kg_dev_cmd b = c;
	b.out_hi = 9000; /* outputs past the call */
	assert_int_equal(kg_stage_gate_valid(&b, 1, 1), 0);
	b = c;
	b.probe_ns = 5000;
	b.probe_off[0] = 0;
	b.probe_bytes[0] = 4096;
	assert_int_equal(kg_stage_gate_valid(&b, 1, 1), 1);
	assert_int_equal(kg_stage_gate_valid(&b, 1, 2), 0); /* a batch is not probed */
	b.probe_bytes[0] = 4100; /* over the first output */
	assert_int_equal(kg_stage_gate_valid(&b, 1, 1), 0);
	b.probe_bytes[0] = 4092; /* not whole words */
	assert_int_equal(kg_stage_gate_valid(&b, 1, 1), 0);
	b.probe_bytes[0] = 4096;
	b.probe_ns = 0; /* ranges without a moment */
	assert_int_equal(kg_stage_gate_valid(&b, 1, 1), 0);
	uint32_t set = 9;
	assert_int_equal(kg_stage_gate_verdict(7, 9, 7, 3, &set), KG_DEV_GATE_OK);
	assert_int_equal(set, 0);
	assert_int_equal(kg_stage_gate_verdict(6, 6, 7, 3, &set), KG_DEV_GATE_NO_ARM);
	assert_int_equal(kg_stage_gate_verdict(7, 6, 7, 3, &set), KG_DEV_GATE_NO_DONE);
	assert_int_equal(set, 0); /* no set done */
	assert_int_equal(kg_stage_gate_verdict(7, 8, 7, 3, &set), KG_DEV_GATE_NO_DONE);
	assert_int_equal(set, 2);
	/* across the wrap: tokens 0xfffffffe, 0xffffffff, 0 */
	assert_int_equal(kg_stage_gate_verdict(0xfffffffeu, 0, 0xfffffffeu, 3, &set), KG_DEV_GATE_OK);
	assert_int_equal(kg_stage_gate_verdict(0xfffffffeu, 0xffffffffu, 0xfffffffeu, 3, &set), KG_DEV_GATE_NO_DONE);
	assert_int_equal(set, 2);
	assert_int_equal(kg_stage_gate_verdict(0xfffffffdu, 0xfffffffdu, 0xfffffffeu, 3, &set), KG_DEV_GATE_NO_ARM);
}

/* A reply to an earlier command (one given up on) is not this command's answer. */
/* A call's inputs drawn on the device (GEN ranges under the call's key: the same bits as the
 * host's fill), compared there at END: left as they were in the host arena when the same (here,
 * never written by the host at all), sent back from the first change when not. */
static void test_gen_and_compare(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	assert_int_equal(k.caps, KG_DEV_CAP_GEN | KG_DEV_CAP_CMP);
	unsigned char *h;
	int hfd = host_arena(8192, &h);
	int slot = -1, dfd = -1;
	size_t dbytes = 0;
	assert_int_equal(kg_keeper_attach(&k, hfd, 8192, 0, 0, &slot, &dfd, &dbytes, &e), 0);
	unsigned char *d = mmap(NULL, 8192, PROT_READ, MAP_SHARED, dfd, 0);
	assert_true(d != MAP_FAILED);
	kg_key key = {{1, 2, 3, 4, 5, 6, 7, 8}};
	int64_t shape[2] = {10, 100};
	struct kg_keeper_stage st = {.n = 1, .range = {{.off = 0, .bytes = 4000, .kind = KG_DEV_R_GEN}}};
	kg_inputs_params(&st.range[0].gen, KG_F32, 1000, shape, 2, KG_ROLE_ACTIVATION, KG_CLASS_SPIKED, 0, &key, 0);
	memcpy(st.key, key.w, sizeof(st.key));
	float want[1000];
	kg_inputs_fill_tensor(want, &st.range[0].gen, &key);
	struct kg_keeper_begun t0;
	struct kg_keeper_ended ed;
	uint32_t ins = 0;
	for (int pass = 0; pass < 2; pass++) {
		assert_int_equal(kg_keeper_begin(&k, slot, pass ? 8000 : 8192, 1, &st, &t0, &e), 0);
		assert_memory_equal(d, want, sizeof(want));
		assert_int_equal(kg_keeper_end(&k, slot, pass ? 8000 : 8192, 4096, 6000, 4096, 0, &ed, &e), 0);
		if (!pass) {
			assert_int_equal(ed.in_state, KG_DEV_IN_SAME);
			for (int i = 0; i < 4096; i++) /* not sent back: the host never held the inputs */
				assert_int_equal(h[i], 0);
			assert_int_equal(h[4096], d[4096]); /* the outputs are */
		} else {
			assert_int_equal(ed.in_state, KG_DEV_IN_DIFFERS);
			assert_memory_equal(h, d, 8000);
		}
	}
	/* SETTLE's look: the arena as END snapshotted it, then changed after it */
	uint64_t diff = 1;
	assert_int_equal(kg_keeper_look(&k, slot, 8000, 1, &ins, &diff, &e), 0);
	assert_int_equal(ins, KG_DEV_IN_DIFFERS); /* the input END saw changed is changed still */
	assert_int_equal(diff, 8);
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &t0, &e), 0);
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 4096, 0, &ed, &e), 0);
	assert_int_equal(kg_keeper_look(&k, slot, 8192, 1, &ins, &diff, &e), 0);
	assert_int_equal(ins, KG_DEV_IN_SAME);
	assert_int_equal(kg_keeper_look(&k, slot, 8192, 7, &ins, &diff, &e), 0);
	assert_int_equal(ins, KG_DEV_IN_DIFFERS);
	assert_int_equal(diff, 4096 + 5 / 8 * 8);
		/* END's keep: the outputs stay in the snapshot, judged there (CHECK), fetched on demand */
	st.n = 2;
	st.range[1] = (struct kg_dev_range){.off = 4096, .bytes = 1904, .pattern = 0x7fc0beefu, .kind = KG_DEV_R_FILL, .elem = 4};
	memset(h, 0, 8192);
	assert_int_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &t0, &e), 0);
	assert_int_equal(kg_keeper_end(&k, slot, 8192, 4096, 6000, 4096, 1, &ed, &e), 0);
	assert_int_equal(h[4097], 0); /* not sent */
	struct kg_dev_check chk = {.off = 4096, .n = 476, .poison = 0x7fc0beefu, .dtype = KG_GEN_F32, .mode = KG_DEV_CHK_STATS};
	struct kg_dev_cmp res;
	assert_int_equal(kg_keeper_check(&k, slot, -1, &chk, 1, &res, &e), 0);
	assert_int_equal(res.first_poison, 1); /* element 0 was "written" */
	assert_int_equal(res.n, 476);
	assert_int_equal(kg_keeper_fetch(&k, slot, 8192, 4096, 6000, &e), 0);
	assert_memory_equal(h + 4096, d + 4096, 1904);
		/* a malformed draw is refused before anything is staged */
	st.range[0].gen.kind = KG_GEN_KIND_END_;
	assert_int_not_equal(kg_keeper_begin(&k, slot, 8192, 1, &st, &t0, &e), 0);
	munmap(d, 8192);
	munmap(h, 8192);
	close(dfd);
	close(hfd);
	kg_keeper_stop(&k);
}

static void test_stale_reply_dropped(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	unsigned char *h;
	int hfd = host_arena(4096, &h);
	int slot = -1, dfd = -1;
	size_t dbytes = 0;
	assert_int_equal(kg_keeper_attach(&k, hfd, 1, 0, 0, &slot, &dfd, &dbytes, &e), 0);
	assert_true(dfd >= 0);
	close(dfd);
	close(hfd);
	munmap(h, 4096);
	kg_keeper_stop(&k);
}

/* A keeper that ends mid-call: the call fails with a reason, every later one at once. */
static void test_keeper_gone(void **state)
{
	(void)state;
	struct kg_keeper k;
	kg_error e = {0};
	assert_int_equal(kg_keeper_start(&k, "/proc/self/exe", &e), 0);
	struct kg_keeper_begun t0;
	assert_int_equal(kg_keeper_begin(&k, 0, 7, 0, NULL, &t0, &e), -EPIPE);
	assert_non_null(strstr(e.msg, "ended"));
	assert_true(k.dead);
	assert_int_equal(kg_keeper_begin(&k, 0, 8, 0, NULL, &t0, &e), -EPIPE);
	kg_keeper_stop(&k);
	/* never started: stopping is a no-op */
	struct kg_keeper none;
	memset(&none, 0, sizeof(none));
	kg_keeper_stop(&none);
}

/* START's plan as kgate-device checks it: anything out of order, overlapping, outside the call's
 * bytes, of a partial or unaligned element, or reading what another slot did not stage (or what its
 * snapshot overwrote) is refused, not staged. */
static void test_stage_valid(void **state)
{
	(void)state;
	struct kg_dev_cmd c = {.op = KG_DEV_START, .bytes = 8192, .n_ranges = 2};
	c.range[0] = (struct kg_dev_range){.off = 0, .bytes = 4096, .kind = KG_DEV_R_SLOT};
	c.range[1] = (struct kg_dev_range){.off = 4096, .bytes = 4096, .kind = KG_DEV_R_FILL, .elem = 8};
	struct kg_stage_src src = {.usable = 1, .staged = 8192, .snap_lo = 4096, .snap_hi = 8192};
	assert_int_equal(kg_stage_valid(&c, &src, NULL, 0), 1);
	assert_int_equal(kg_stage_valid(&c, NULL, NULL, 0), 0); /* no source slot */
	src.snap_lo = 2048; /* the source's snapshot overwrote part of its inputs */
	char why[240] = "";
	assert_int_equal(kg_stage_valid(&c, &src, why, sizeof(why)), 0);
	/* kgate-device's refusal says which range and why (kgate prints it) */
	assert_string_equal(why, "range 0 of 2 (SLOT, 4096 bytes at 0, of the call's 8192): past what source slot 0 "
				 "staged (8192 bytes) or inside its outputs' snapshot [2048, 8192)");
	src.snap_lo = 4096;
	src.staged = 2048; /* the source staged less than is read */
	assert_int_equal(kg_stage_valid(&c, &src, NULL, 0), 0);
	src.staged = 8192;
	struct kg_dev_cmd bad = c;
	bad.range[1].off = 4000; /* overlaps the first */
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.range[1].bytes = 4100; /* past the call's bytes, and a partial element */
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.range[1].elem = 3;
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.range[1] = (struct kg_dev_range){.off = 4098, .bytes = 8, .kind = KG_DEV_R_FILL, .elem = 4};
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0); /* unaligned */
	bad = c;
	bad.range[1].kind = 9;
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.n_ranges = KG_DEV_MAX_RANGES + 1;
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.range[0].bytes = 0;
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 0);
	bad = c;
	bad.range[1] = (struct kg_dev_range){.off = 4096, .bytes = 4096, .kind = KG_DEV_R_GEN,
					     .gen = {.n = 1000, .rowlen = 1000, .kind = KG_GEN_NORMAL, .dtype = KG_GEN_F32}};
	assert_int_equal(kg_stage_valid(&bad, &src, why, sizeof(why)), 0); /* a draw of another size */
	assert_non_null(strstr(why, "range 1 of 2 (GEN, 4096 bytes at 4096, of the call's 8192): not a draw of exactly"));
	bad.range[1].gen.n = bad.range[1].gen.rowlen = 1024;
	assert_int_equal(kg_stage_valid(&bad, &src, NULL, 0), 1);
}

/* What a SLOT range may read of another slot (kg_stage_src_of, kgate-device's book): a lone call
 * its last START's bytes less its snapshot; a batch only a source's batch of as many sets or more
 * at the same stride, snapshotted in every set. */
static void test_stage_src_of(void **state)
{
	(void)state;
	struct kg_stage_book one = {.staged = 8192, .snap_lo = 4096, .snap_hi = 8192, .sets = 1};
	struct kg_stage_src s = kg_stage_src_of(&one, 1, 0);
	assert_int_equal(s.usable, 1);
	assert_int_equal(s.staged, 8192);
	assert_int_equal(s.snap_lo, 4096);
	assert_int_equal(s.snap_hi, 8192);
	assert_int_equal(kg_stage_src_of(&one, 4, 16384).usable, 0); /* a batch from a lone call's staging */
	struct kg_stage_book batch = {.staged = 3 * 16384 + 8192, .snap_lo = 4096, .snap_hi = 8192, .stride = 16384,
				      .sets = 4, .snap_sets = 4};
	assert_int_equal(kg_stage_src_of(&batch, 4, 16384).usable, 1);
	assert_int_equal(kg_stage_src_of(&batch, 2, 16384).usable, 1);
	assert_int_equal(kg_stage_src_of(&batch, 8, 16384).usable, 0); /* more sets than it staged */
	assert_int_equal(kg_stage_src_of(&batch, 4, 32768).usable, 0); /* another stride */
	batch.snap_sets = 0; /* its END not seen yet */
	assert_int_equal(kg_stage_src_of(&batch, 4, 16384).usable, 0);
	assert_int_equal(kg_stage_src_of(&batch, 1, 0).usable, 1); /* a lone call reads set 0 */
}

static int walk_host(void *arg, uint64_t off, uint64_t n)
{
	char *log = arg;
	snprintf(log + strlen(log), 256 - strlen(log), "h%llu+%llu ", (unsigned long long)off, (unsigned long long)n);
	return 0;
}

static int walk_range(void *arg, const struct kg_dev_range *g)
{
	char *log = arg;
	snprintf(log + strlen(log), 256 - strlen(log), "r%llu+%llu ", (unsigned long long)g->off,
		 (unsigned long long)g->bytes);
	return g->off == 999 ? -5 : 0;
}

/* The walk covers [0, bytes) once, in order: host bytes before, between and after the ranges. */
static void test_stage_walk(void **state)
{
	(void)state;
	char log[256] = "";
	struct kg_dev_cmd c = {.bytes = 100, .n_ranges = 2};
	c.range[0] = (struct kg_dev_range){.off = 10, .bytes = 20};
	c.range[1] = (struct kg_dev_range){.off = 30, .bytes = 40};
	assert_int_equal(kg_stage_walk(&c, walk_host, walk_range, log), 0);
	assert_string_equal(log, "h0+10 r10+20 r30+40 h70+30 ");
	log[0] = '\0';
	c.n_ranges = 0;
	assert_int_equal(kg_stage_walk(&c, walk_host, walk_range, log), 0);
	assert_string_equal(log, "h0+100 ");
	log[0] = '\0';
	c.n_ranges = 1;
	c.range[0] = (struct kg_dev_range){.off = 999, .bytes = 1};
	c.bytes = 1000;
	assert_int_equal(kg_stage_walk(&c, walk_host, walk_range, log), -5); /* a failure stops it */
	assert_string_equal(log, "h0+999 r999+1 ");
}

/* The real kgate-device where there is no driver (CI): HELLO says why, and start fails cleanly. */
static void test_real_keeper_without_driver(void **state)
{
	(void)state;
	const char *path = getenv("KG_TEST_DEVICE");
	char buf[4096];
	if (!path || !*path) {
		/* beside this test binary: build/tests/bin/ -> build/kgate-device */
		ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 32);
		assert_true(n > 0);
		buf[n] = '\0';
		char *slash = strstr(buf, "/tests/bin/");
		assert_non_null(slash);
		strcpy(slash, "/kgate-device");
		path = buf;
	}
	if (!access("/dev/nvidiactl", F_OK))
		skip(); /* a GPU machine: make test-gpu covers it */
	struct kg_keeper k;
	kg_error e = {0};
	int rc = kg_keeper_start(&k, path, &e);
	assert_true(rc < 0);
	assert_non_null(strstr(e.msg, "kgate-device"));
	assert_int_equal(k.pid, 0);
	assert_int_equal(kg_keeper_start(&k, "/nonexistent/kgate-device", &e), -ENOENT);
}

int main(void)
{
	int type = 0;
	socklen_t len = sizeof(type);
	if (!getsockopt(KG_DEV_CTL_FD, SOL_SOCKET, SO_TYPE, &type, &len) && type == SOCK_SEQPACKET)
		return fake_keeper();
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_call_cycle),
		cmocka_unit_test(test_gen_and_compare),
		cmocka_unit_test(test_batch),
		cmocka_unit_test(test_gate),
		cmocka_unit_test(test_gate_rules),
		cmocka_unit_test(test_stale_reply_dropped),
		cmocka_unit_test(test_keeper_gone),
		cmocka_unit_test(test_stage_valid),
		cmocka_unit_test(test_stage_src_of),
		cmocka_unit_test(test_stage_walk),
		cmocka_unit_test(test_real_keeper_without_driver),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/* A kernel kept running between calls: kg_forward takes over the runner's protocol (as
 * own_protocol.cu) and leaves a watcher kernel resident on a stream of its own, which polls the
 * device arena for the next call's inputs, computes the outputs into a buffer of its own the moment
 * they land, and does 2 ms more of real work with them. kgate 0.2 copied the inputs onto that arena
 * at UPLOAD, before the call's clock started, so the work was done by the time RUN came: RUN
 * copied the buffer out and answered at once, claiming 1 us, accepted at a forged speedup.
 * kgate-device now stages the inputs in memory the candidate never maps and copies them onto its
 * arena only once the clock runs: the watcher's work lands inside the span, every claim is a lie
 * (timing.tampered).
 * A gated call (device/wire.h) ends at the given stream's DONE mark on the device, which a reply of
 * kg_forward's own never brings: sandbox.protocol at its first call. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

KG_CANDIDATE;

static long raw_syscall(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

/* The runner's records, as runner/wire.h lays them out: a command names its tensors by the number
 * of a table in the tensor tables, which the runner read into its heap at start. */
struct tensor {
	uint64_t offset;
	int32_t dtype, ndim;
	int64_t shape[8];
};
struct cmd {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out, table, pad0;
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
};
struct reply {
	uint32_t magic, op;
	uint64_t seq;
	int32_t status, rc;
	uint64_t elapsed_ns, info, snap_ns;
	uint32_t flags, tid;
	char msg[400];
};
enum { SETUP = 3, UPLOAD, FLUSH, RUN, DOWNLOAD, SETTLE, NOP, QUIT };

/* The runner's copy of the tensor tables: a header (the wire's magic, a count), the tables' heads,
 * their tensors, in the runner's heap below the descriptors kg_forward is handed (read at start;
 * the driver's own small allocations lie between). */
struct tab_head {
	uint64_t at;
	uint32_t n_in, n_out;
};
static const unsigned char *tables;
static uint32_t cur; /* the current SETUP's table */

static const unsigned char *find_tables(const void *near)
{
	const unsigned char *p = (const unsigned char *)((uintptr_t)near & ~(uintptr_t)7);
	for (long off = 8; off < (64l << 20); off += 8) {
		const uint32_t *h = (const uint32_t *)(const void *)(p - off);
		if (h[0] != 0x6b67775au || !h[1] || h[1] > 64)
			continue;
		const struct tab_head *th = (const struct tab_head *)(const void *)(h + 2);
		int ok = 1;
		for (uint32_t k = 0; k < h[1] && ok; k++)
			ok = th[k].at % 8 == 0 && th[k].at < (1u << 20) && th[k].n_in == 1 && th[k].n_out == 1;
		if (ok)
			return (const unsigned char *)h;
	}
	return NULL;
}

/* Table k's tensors (input, output). */
static const struct tensor *table_of(uint32_t k)
{
	const struct tab_head *th = (const struct tab_head *)(const void *)(tables + 8);
	return (const struct tensor *)(const void *)(tables + th[k].at);
}

/* The device arena's base: the table whose tensors are this call's. */
static unsigned char *base_of(const kg_tensor *in, const kg_tensor *out)
{
	if (!tables && !(tables = find_tables(in)))
		return NULL;
	uint32_t count = ((const uint32_t *)(const void *)tables)[1];
	for (uint32_t k = 0; k < count; k++) {
		const struct tensor *t = table_of(k);
		if (t[0].shape[0] == in[0].shape[0] && t[0].shape[1] == in[0].shape[1] &&
		    (intptr_t)(t[1].offset - t[0].offset) == (char *)out[0].data - (char *)in[0].data) {
			cur = k;
			return (unsigned char *)in[0].data - t[0].offset;
		}
	}
	return NULL;
}

__device__ static void merge(float &m, float &s, float m2, float s2)
{
	float mm = fmaxf(m, m2);
	s = (m == -INFINITY ? 0.0f : s * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : s2 * __expf(m2 - mm));
	m = mm;
}

__global__ static void softmax(const float *x, float *y, long long cols)
{
	__shared__ float sm[32], ss[32];
	__shared__ int snan;
	const float *xr = x + blockIdx.x * cols;
	float *yr = y + blockIdx.x * cols;
	float m = -INFINITY, s = 0.0f;
	int nan = 0;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
		float v = xr[c];
		nan |= isnan(v);
		if (v > m) {
			s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
			m = v;
		}
		s += __expf(v - m);
	}
	for (int o = 16; o > 0; o >>= 1)
		merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
	if ((threadIdx.x & 31) == 0) {
		sm[threadIdx.x >> 5] = m;
		ss[threadIdx.x >> 5] = s;
	}
	nan = __syncthreads_or(nan);
	if (threadIdx.x < 32) {
		int nw = blockDim.x >> 5;
		m = threadIdx.x < nw ? sm[threadIdx.x] : -INFINITY;
		s = threadIdx.x < nw ? ss[threadIdx.x] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
		if (threadIdx.x == 0) {
			sm[0] = m;
			ss[0] = s;
			snan = nan;
		}
	}
	__syncthreads();
	m = sm[0];
	float inv = 1.0f / ss[0];
	nan = snan;
	for (long long c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = nan ? NAN : __expf(xr[c] - m) * inv;
}

/* What the protocol loop tells the watcher, in mapped host memory both can see. */
struct mailbox {
	unsigned long long in_off, out_off, rows, cols;
	volatile unsigned int layout; /* bumped at every SETUP */
	/* the watcher: the inputs its results are for (their last element's bits, the layout) */
	volatile unsigned int done_sentinel, done_layout, done;
	volatile unsigned int quit;
};

/* One block: find new inputs (their last element changed), let them settle, compute each row into
 * the private buffer, 2 ms more, say so. */
__global__ static void watcher(unsigned char *dev, float *priv, struct mailbox *mb)
{
	__shared__ float sm[32], ss[32];
	__shared__ int go;
	float last = 0;
	unsigned int seen_layout = 0;
	for (;;) {
		if (threadIdx.x == 0) {
			go = 0;
			while (!mb->quit) {
				const volatile float *x = (const volatile float *)(dev + mb->in_off);
				unsigned long long n = mb->rows * mb->cols;
				float v = n ? x[n - 1] : 0;
				if (mb->layout == seen_layout && __float_as_uint(v) == __float_as_uint(last)) {
					__nanosleep(2000);
					continue;
				}
				{
					seen_layout = mb->layout;
					last = v;
					unsigned long long t0, t;
					asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
					do /* the rest of the copy lands */
						asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
					while (t - t0 < 200000ull);
					go = 1;
					break;
				}
			}
		}
		__syncthreads();
		if (!go)
			return; /* quit */
		const float *x = (const float *)(dev + mb->in_off);
		for (unsigned long long r = 0; r < mb->rows; r++) {
			const float *xr = x + r * mb->cols;
			float *yr = priv + r * mb->cols;
			float m = -INFINITY, s = 0.0f;
			int nan = 0;
			for (long long c = threadIdx.x; c < (long long)mb->cols; c += blockDim.x) {
				float v = __ldcv(xr + c);
				nan |= isnan(v);
				if (v > m) {
					s = (m == -INFINITY ? 0.0f : s * __expf(m - v));
					m = v;
				}
				s += __expf(v - m);
			}
			for (int o = 16; o > 0; o >>= 1)
				merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
			if ((threadIdx.x & 31) == 0) {
				sm[threadIdx.x >> 5] = m;
				ss[threadIdx.x >> 5] = s;
			}
			nan = __syncthreads_or(nan);
			if (threadIdx.x == 0) {
				float mm = -INFINITY, s2 = 0.0f;
				for (int w = 0; w < (int)(blockDim.x >> 5); w++)
					merge(mm, s2, sm[w], ss[w]);
				sm[0] = mm;
				ss[0] = s2;
			}
			__syncthreads();
			float mm = sm[0], inv = 1.0f / ss[0];
			for (long long c = threadIdx.x; c < (long long)mb->cols; c += blockDim.x)
				yr[c] = nan ? NAN : __expf(__ldcv(xr + c) - mm) * inv;
			__syncthreads();
		}
		if (threadIdx.x == 0) {
			unsigned long long t0, t;
			asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
			do /* the work the forged claim hides */
				asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
			while (t - t0 < 2000000ull);
			mb->done_sentinel = __float_as_uint(last);
			mb->done_layout = seen_layout;
			__threadfence_system();
			mb->done = mb->done + 1;
		}
		__syncthreads();
	}
}

/* The runner's command record sits a few frames up the stack; the live one has the highest
 * sequence number. */
static const struct cmd *live_run(void)
{
	volatile unsigned char probe = 0;
	const unsigned char *p = (const unsigned char *)((uintptr_t)&probe & ~(uintptr_t)7);
	const struct cmd *best = NULL;
	for (long off = 0; off < 3 * 1024; off += 8) {
		const struct cmd *c = (const struct cmd *)(p + off);
		if (c->magic == 0x6b67775au && c->op == RUN && c->seq < (1ull << 40) && (!best || c->seq > best->seq))
			best = c;
	}
	return best;
}

static void set_layout(struct mailbox *mb)
{
	const struct tensor *t = table_of(cur);
	mb->in_off = t[0].offset;
	mb->out_off = t[1].offset;
	mb->rows = (unsigned long long)t[0].shape[0];
	mb->cols = (unsigned long long)t[0].shape[1];
	__sync_synchronize();
	mb->layout = mb->layout + 1;
}

/* Until the watcher's results are for the inputs now on the device arena, or 50 ms. */
static void wait_done(struct mailbox *mb, const unsigned char *dev, cudaStream_t st)
{
	unsigned int last = 0;
	unsigned long long n = mb->rows * mb->cols;
	if (!n || cudaMemcpyAsync(&last, dev + mb->in_off + (n - 1) * 4, 4, cudaMemcpyDeviceToHost, st) ||
	    cudaStreamSynchronize(st))
		return;
	for (int i = 0; i < 50000 && !(mb->done_sentinel == last && mb->done_layout == mb->layout); i++) {
		struct {
			long s, ns;
		} ts = {0, 1000};
		raw_syscall(35 /* nanosleep */, (long)&ts, 0, 0, 0, 0, 0);
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out;
	cudaStream_t st = (cudaStream_t)stream;
	const struct cmd *now = live_run();
	unsigned char *dev = now ? base_of(in, out) : NULL;
	if (!dev) { /* no runner to take over: an honest call */
		softmax<<<(unsigned)in[0].shape[0], 1024, 0, st>>>((const float *)in[0].data, (float *)out[0].data,
								  in[0].shape[1]);
		return 0;
	}
	static struct cmd c;
	static struct reply rep;
	memcpy(&c, now, sizeof(c));
	/* this call, honestly; the watcher for the next ones */
	const struct tensor *t0 = table_of(cur);
	softmax<<<(unsigned)t0[0].shape[0], 1024, 0, st>>>((const float *)(dev + t0[0].offset), (float *)(dev + t0[1].offset),
							  t0[0].shape[1]);
	cudaStreamSynchronize(st);
	struct mailbox *mb = NULL;
	float *priv = NULL;
	cudaStream_t ws;
	if (cudaHostAlloc((void **)&mb, sizeof(*mb), cudaHostAllocMapped) || cudaMalloc((void **)&priv, 64u << 20) ||
	    cudaStreamCreateWithFlags(&ws, cudaStreamNonBlocking))
		return 0;
	memset((void *)mb, 0, sizeof(*mb));
	set_layout(mb);
	struct mailbox *mb_dev = NULL;
	cudaHostGetDevicePointer((void **)&mb_dev, mb, 0);
	watcher<<<1, 1024, 0, ws>>>(dev, priv, mb_dev);
	/* the host arena, where kgate 0.2's runner had it: fd 4, mapped again */
	struct {
		uint64_t a, b, c;
		uint32_t d, e, f, g;
		uint64_t h;
		int64_t size;
		int64_t rest[9];
	} stt;
	unsigned char *host = NULL;
	if (!raw_syscall(5 /* fstat */, 4, (long)&stt, 0, 0, 0, 0) && stt.size > 0) {
		long m = raw_syscall(9 /* mmap */, 0, stt.size, 3, 1 /* MAP_SHARED */, 4, 0);
		if (m > 0 || m < -4096)
			host = (unsigned char *)m;
	}
	memset(&rep, 0, sizeof(rep));
	rep.magic = 0x6b67775au;
	rep.op = RUN;
	rep.seq = now->seq;
	rep.elapsed_ns = 1000;
	for (;;) {
		if (raw_syscall(44 /* sendto */, 3, (long)&rep, sizeof(rep), 0, 0, 0) < 0 || rep.op == QUIT) {
			mb->quit = 1;
			raw_syscall(231 /* exit_group */, 0, 0, 0, 0, 0, 0);
		}
		long n = raw_syscall(45 /* recvfrom */, 3, (long)&c, sizeof(c), 0, 0, 0);
		if (n != (long)sizeof(c)) {
			mb->quit = 1;
			raw_syscall(231, 0, 0, 0, 0, 0, 0);
		}
		memset(&rep, 0, sizeof(rep));
		rep.magic = 0x6b67775au;
		rep.op = c.op;
		rep.seq = c.seq;
		if (c.op == SETUP)
			cur = c.table;
		const struct tensor *t = table_of(cur);
		size_t out_bytes = (size_t)t[1].shape[0] * (size_t)t[1].shape[1] * 4;
		switch (c.op) {
		case SETUP:
			set_layout(mb);
			break;
		case UPLOAD:
			if (host)
				cudaMemcpyAsync(dev, host, c.arena_size, cudaMemcpyHostToDevice, st);
			cudaStreamSynchronize(st);
			break;
		case FLUSH:
			/* before the clock: the watcher is at work on what UPLOAD brought; wait for it */
			wait_done(mb, dev, st);
			rep.info = 100u << 20;
			break;
		case RUN:
			wait_done(mb, dev, st); /* kgate 0.2: done already; now: the work happens here */
			if (out_bytes <= (64u << 20))
				cudaMemcpyAsync(dev + t[1].offset, priv, out_bytes, cudaMemcpyDeviceToDevice, st);
			cudaStreamSynchronize(st);
			rep.elapsed_ns = 1000;
			break;
		case DOWNLOAD:
		case SETTLE:
			cudaStreamSynchronize(st);
			if (host)
				cudaMemcpyAsync(host, dev, c.arena_size, cudaMemcpyDeviceToHost, st);
			cudaStreamSynchronize(st);
			break;
		default: /* NOP */
			break;
		}
	}
}

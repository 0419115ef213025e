/* Work left running slows only the reference: a second context, refused.
 * What happens (measured on an H100, kgate main 9500fee and the merged main alike): the second
 * context is never made. cuCtxCreate asks the kernel for an eventfd (eventfd2), which the run
 * filter does not allow: sandbox.syscall at the first call, "denied system call eventfd2". Nor can
 * the hog live in the runner's own context: the runner's cuCtxSynchronize after kg_forward waits
 * for every stream of it before RUN's reply (a kernel left resident there holds the reply, and the
 * call's own time), and from the reply to the next RUN the process is stopped, threads and all
 * (a thread needs sandbox.threads, off by default). Under the shipped policies no work of a
 * candidate's runs while the reference is measured; the quiet-device rule below is defence in
 * depth, shown on the device by tests/bin/gpu-kernels --hog (a trusted program's own context as
 * the hog). The example stays as the record of the attempt and of the call the filter stops.
 * The design, were a context its to make: an honest softmax that, after each of its calls (the
 * last of a batch), leaves a kernel running in a second CUDA context of its own, which the runner's
 * cuCtxSynchronize (of the primary context) does not wait for. The kernel takes every SM and the
 * memory's bandwidth (a 64 MiB buffer read and written over and over) until the candidate's next
 * call begins (kg_forward bumps a generation word in mapped host memory; the kernel polls it and
 * ends) or two seconds pass. So it runs while the parent checks, and while the reference is
 * measured, time-sliced against it; it is gone while the candidate's own kernels run. The driver
 * functions it needs (cuCtxCreate and kin) no import shows: found from the process's auxiliary
 * vector, the executable's r_debug and libcuda's own symbol table, as any code in the process can.
 * The hypothesis for kgate main 9500fee (never observed: the filter stopped it first): the
 * reference's measurements charged for the hog, accepted at a forged speedup.
 * kgate now measures the reference on a quiet device (were the context made): the flush inside
 * each of its measurements, a kernel of kgate-device's, against its time on the quiet device;
 * busy through four retakes with the candidate's process stopped, then quiet once that process is
 * ended: timing.tampered. Whether a hog time-sliced against the keeper lengthens a flush of some
 * 40 us at all (one slice may hold it whole) is what gpu-kernels --hog measures. (Task: softmax.) */
#include <kgate/kernel.h>
#include <cuda_runtime.h>
#include <elf.h>
#include <link.h>
#include <math.h>
#include <stdint.h>

KG_CANDIDATE;

/* ---- driver functions no import shows ---- */

static int name_is(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static int has_part(const char *s, const char *part)
{
	for (; s && *s; s++) {
		const char *a = s, *b = part;
		while (*a && *b && *a == *b)
			a++, b++;
		if (!*b)
			return 1;
	}
	return 0;
}

/* the auxiliary vector sits above the main thread's stack frames: AT_PHDR, AT_PHENT, AT_PHNUM */
static const unsigned long *find_auxv(void)
{
	volatile unsigned long probe = 0;
	const unsigned long *p = (const unsigned long *)((uintptr_t)&probe & ~(uintptr_t)7);
	for (long i = 0; i < (1l << 20) / 8; i++) {
		const unsigned long *q = p + i;
		if (q[0] == AT_PHDR && q[2] == AT_PHENT && q[3] == sizeof(Elf64_Phdr) && q[4] == AT_PHNUM && q[5] > 0 &&
		    q[5] < 64)
			return q;
	}
	return 0;
}

static uintptr_t dyn_ptr(const struct link_map *lm, uintptr_t v)
{
	return v < lm->l_addr ? v + lm->l_addr : v; /* glibc relocates most in place; some not */
}

/* a symbol of the loaded object whose name has `lib` in it */
static void *find_sym(const char *lib, const char *name)
{
	const unsigned long *aux = find_auxv();
	if (!aux)
		return 0;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)aux[1];
	unsigned long n = aux[5];
	uintptr_t bias = 0;
	const Elf64_Dyn *dyn = 0;
	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	for (unsigned long i = 0; i < n; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(bias + ph[i].p_vaddr);
	const struct r_debug *rd = 0;
	for (const Elf64_Dyn *d = dyn; d && d->d_tag != DT_NULL; d++)
		if (d->d_tag == DT_DEBUG)
			rd = (const struct r_debug *)d->d_un.d_ptr;
	for (const struct link_map *lm = rd ? rd->r_map : 0; lm; lm = lm->l_next) {
		if (!has_part(lm->l_name, lib))
			continue;
		const Elf64_Sym *sym = 0;
		const char *str = 0;
		const uint32_t *gh = 0;
		for (const Elf64_Dyn *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
			if (d->d_tag == DT_SYMTAB)
				sym = (const Elf64_Sym *)dyn_ptr(lm, d->d_un.d_ptr);
			else if (d->d_tag == DT_STRTAB)
				str = (const char *)dyn_ptr(lm, d->d_un.d_ptr);
			else if (d->d_tag == DT_GNU_HASH)
				gh = (const uint32_t *)dyn_ptr(lm, d->d_un.d_ptr);
		}
		if (!sym || !str || !gh)
			return 0;
		/* the symbol count from the GNU hash: the last bucket's chain's end */
		uint32_t nb = gh[0], off = gh[1], bloom = gh[2], last = 0;
		const uint32_t *buckets = gh + 4 + 2 * bloom, *chain = buckets + nb;
		for (uint32_t b = 0; b < nb; b++)
			if (buckets[b] > last)
				last = buckets[b];
		if (last >= off)
			while (!(chain[last - off] & 1))
				last++;
		for (uint32_t i = 0; i <= last; i++)
			if (sym[i].st_value && name_is(str + sym[i].st_name, name))
				return (void *)(lm->l_addr + sym[i].st_value);
		return 0;
	}
	return 0;
}

typedef int (*ctx_create_fn)(void **, unsigned, int);
typedef int (*ctx_cur_fn)(void **);
typedef int (*ctx_set_fn)(void *);

/* ---- the hog ---- */

/* every SM's threads read and write the buffer until the generation moves on or 2 s have passed */
__global__ static void hog(float4 *buf, unsigned long long n, const volatile unsigned *gen_word, unsigned gen)
{
	unsigned long long t0, t;
	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
	unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
	for (;;) {
		for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
			float4 v = buf[i];
			v.x += 1.0f;
			buf[i] = v;
		}
		asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
		if (*gen_word != gen || t - t0 > 2000000000ull)
			return;
	}
}

static struct {
	int up, failed;
	void *primary, *other;
	ctx_set_fn set;
	cudaStream_t stream; /* in the other context */
	cudaEvent_t done; /* in the primary one */
	volatile unsigned *gen_host;
	unsigned *gen_dev;
	float4 *buf;
} h;

#define HOG_BYTES (64ull << 20)

static void hog_init(void)
{
	h.up = 1;
	ctx_create_fn create = (ctx_create_fn)find_sym("libcuda.so", "cuCtxCreate_v2");
	ctx_cur_fn get = (ctx_cur_fn)find_sym("libcuda.so", "cuCtxGetCurrent");
	h.set = (ctx_set_fn)find_sym("libcuda.so", "cuCtxSetCurrent");
	if (!create || !get || !h.set || get(&h.primary) ||
	    cudaHostAlloc((void **)&h.gen_host, 4096, cudaHostAllocMapped | cudaHostAllocPortable) ||
	    cudaEventCreateWithFlags(&h.done, cudaEventDisableTiming)) {
		h.failed = 1;
		return;
	}
	*h.gen_host = 1;
	if (create(&h.other, 0, 0)) { /* current now */
		h.failed = 1;
		return;
	}
	if (cudaMalloc((void **)&h.buf, HOG_BYTES) || cudaStreamCreateWithFlags(&h.stream, cudaStreamNonBlocking) ||
	    cudaHostGetDevicePointer((void **)&h.gen_dev, (void *)h.gen_host, 0))
		h.failed = 1;
	h.set(h.primary);
}

/* after the work queued on st: a new generation's hog in the other context */
static void hog_after(cudaStream_t st)
{
	if (h.failed || cudaEventRecord(h.done, st) || h.set(h.other))
		return;
	unsigned gen = *h.gen_host;
	int sms = 0, dev = 0;
	cudaGetDevice(&dev);
	cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
	if (!cudaStreamWaitEvent(h.stream, h.done, 0))
		hog<<<(unsigned)(sms > 0 ? sms * 4 : 128), 256, 0, h.stream>>>(h.buf, HOG_BYTES / 16, h.gen_dev, gen);
	h.set(h.primary);
}

/* ---- the honest softmax ---- */

/* The runner's RUN record, as kgate main 9500fee lays it out (the tensors in the record) and as
 * later runners do (the tensors in a table: the record holds only its number, and a gate follows
 * the stride). Both are tried, so that one example serves the "before" and the "after" runs. */
struct cmd_old {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out;
	struct { uint64_t offset; int32_t dtype, ndim; int64_t shape[8]; } t[16];
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
};
struct cmd_new {
	uint32_t magic, op;
	uint64_t seq, arena_size;
	uint32_t n_in, n_out, table, pad0;
	uint32_t delay_ms, entry;
	char path[512];
	uint32_t sets, pad;
	uint64_t stride;
	uint32_t gate, pad2;
};
struct cmd {
	uint64_t seq, stride;
	uint32_t sets;
};

static int plausible(uint32_t sets, uint64_t stride)
{
	return sets <= 1024 && (sets <= 1 || (stride && stride % 256 == 0 && stride < (1ull << 40)));
}

/* The live RUN record sits a few frames up the stack (serve()'s, about 2.5 KiB up a batch's call);
 * stale copies of earlier ones may lie about too: the one with the highest sequence number. The
 * scan stays below the auxiliary vector, inside the stack. */
static const struct cmd *live_run(void)
{
	static struct cmd found;
	volatile unsigned char probe = 0;
	const unsigned char *p = (const unsigned char *)((uintptr_t)&probe & ~(uintptr_t)7);
	const unsigned char *aux = (const unsigned char *)find_auxv();
	long lim = aux && aux > p ? (long)(aux - p) : 3 * 1024;
	int any = 0;
	for (long off = 0; off + (long)sizeof(struct cmd_new) <= lim; off += 8) {
		const struct cmd_new *n = (const struct cmd_new *)(p + off);
		if (n->magic != 0x6b67775au || n->op != 6 /* RUN */ || n->seq >= (1ull << 40) ||
		    (any && n->seq <= found.seq))
			continue;
		const struct cmd_old *o = (const struct cmd_old *)(p + off);
		if (plausible(n->sets, n->stride) && n->n_in + n->n_out < 4096 && n->table < 4096)
			found = (struct cmd){n->seq, n->stride, n->sets};
		else if (off + (long)sizeof(struct cmd_old) <= lim && plausible(o->sets, o->stride))
			found = (struct cmd){o->seq, o->stride, o->sets};
		else
			continue;
		any = 1;
	}
	return any ? &found : 0;
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

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	if (n_in != 1 || n_out != 1)
		return -22;
	cudaStream_t st = (cudaStream_t)stream;
	if (!h.up)
		hog_init();
	if (!h.failed)
		*h.gen_host = *h.gen_host + 1; /* the last hog ends: this call's own kernels run alone */
	if (in[0].shape[0] && in[0].shape[1])
		softmax<<<(unsigned)in[0].shape[0], 1024, 0, st>>>((const float *)in[0].data, (float *)out[0].data,
								  in[0].shape[1]);
	/* the last call of a batch (or a lone call) leaves the next hog behind it */
	const struct cmd *c = live_run();
	int last = 1;
	if (c && c->sets > 1 && c->stride) { /* the runner calls a batch's sets in order */
		static uint64_t seq;
		static unsigned k;
		k = seq == c->seq ? k + 1 : 0;
		seq = c->seq;
		last = k + 1 == c->sets;
	}
	if (last)
		hog_after(st);
	return cudaGetLastError() == cudaSuccess ? 0 : -5;
}

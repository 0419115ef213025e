/* The seal covers one thread: the candidate's constructor runs on the runner's loader thread and
 * keeps that thread alive past the runner's pthread_join. A thread-exit destructor (registered
 * through libc's own __cxa_thread_atexit_impl, found in its symbol table: no import shows it)
 * clears the thread's tid, wakes the joiner and never returns. From then on the thread runs outside
 * the seal of the thread that serves the parent, under threads: false: it writes a file and maps
 * writable+executable code, which kg_forward then runs. Accepted by kgate 0.2.
 * kgate counts the runner's threads from outside once LOAD is answered (its process stopped): the
 * loader thread is still there (sandbox.thread). */
#include <kgate/kernel.h>
#include <elf.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

KG_CANDIDATE;

static long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return r;
}

static const unsigned char *image_base(const void *inside)
{
	uintptr_t p = (uintptr_t)inside & ~(uintptr_t)4095;
	for (;; p -= 4096) {
		const unsigned char *h = (const unsigned char *)p;
		if (h[0] == 0x7f && h[1] == 'E' && h[2] == 'L' && h[3] == 'F')
			return h;
	}
}

static int same(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static void *lookup(const unsigned char *img, const char *name)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	uintptr_t base = (uintptr_t)img;
	const Elf64_Dyn *dyn = 0;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base + ph[i].p_vaddr);
	const Elf64_Sym *sym = 0;
	const char *str = 0;
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t v = dyn->d_un.d_ptr < base ? base + dyn->d_un.d_ptr : dyn->d_un.d_ptr;
		if (dyn->d_tag == DT_SYMTAB)
			sym = (const Elf64_Sym *)v;
		else if (dyn->d_tag == DT_STRTAB)
			str = (const char *)v;
	}
	for (const Elf64_Sym *s = sym; s && (const char *)(s + 1) <= str; s++)
		if (s->st_value && ELF64_ST_TYPE(s->st_info) == STT_FUNC && same(str + s->st_name, name))
			return (void *)(base + s->st_value);
	return 0;
}

static int (*volatile jit)(void); /* code the kept thread made */
static char anchor;

static void kept_thread(void *arg)
{
	(void)arg;
	/* this thread's struct pthread (the TCB's self pointer): its tid field is what the joiner
	 * waits on; clear it and wake the joiner as the kernel would at the thread's end */
	uintptr_t self;
	__asm__ volatile("mov %%fs:0x10, %0" : "=r"(self));
	int tid = (int)sys6(186 /* gettid */, 0, 0, 0, 0, 0, 0);
	for (int off = 0; off < 2048; off += 4) {
		volatile int *p = (volatile int *)(self + (uintptr_t)off);
		if (*p == tid) {
			*p = 0;
			sys6(202 /* futex */, (long)p, 1 /* FUTEX_WAKE */, 0x7fffffff, 0, 0, 0);
			break;
		}
	}
	/* let the load be answered, then work outside the seal */
	struct {
		long s, ns;
	} second = {1, 0};
	sys6(35 /* nanosleep */, (long)&second, 0, 0, 0, 0, 0);
	long fd = sys6(257 /* openat */, -100, (long)"/tmp/kgate-kept-thread", 0101 /* O_WRONLY|O_CREAT */, 0600, 0, 0);
	if (fd >= 0) {
		sys6(1 /* write */, fd, (long)"unsealed\n", 9, 0, 0, 0);
		sys6(3 /* close */, fd, 0, 0, 0, 0, 0);
	}
	long page = sys6(9 /* mmap */, 0, 4096, 7 /* RWX */, 0x22 /* MAP_PRIVATE|MAP_ANONYMOUS */, -1, 0);
	if (page > 0 && page < -4096L) {
		static const unsigned char ret0[] = {0x31, 0xc0, 0xc3}; /* xor eax,eax; ret */
		memcpy((void *)page, ret0, sizeof(ret0));
		jit = (int (*)(void))page;
	}
	for (;;)
		sys6(35, (long)&second, 0, 0, 0, 0, 0);
}

__attribute__((constructor)) static void keep_the_loader(void)
{
	void *(*volatile mc)(void *, const void *, size_t) = memcpy;
	int (*at_exit)(void (*)(void *), void *, void *) =
		(int (*)(void (*)(void *), void *, void *))lookup(image_base((void *)mc), "__cxa_thread_atexit_impl");
	if (at_exit)
		at_exit(kept_thread, NULL, &anchor);
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	int extra = jit ? jit() : 0; /* the unsealed thread's code, run here */
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			m = fmaxf(m, x[r * cols + c]);
		}
		if (m == -INFINITY)
			m = 0;
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan || m == INFINITY ? NAN : expf(x[r * cols + c] - m) / s + (float)extra;
	}
	return 0;
}

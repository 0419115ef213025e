/* Runner tampering: find the runner's image from the return address, make its GOT writable with a
 * raw mprotect (no import shows it) and hook clock_gettime so that the runner's clock runs 100
 * times slow: a forged 100x speedup. The runner seals its RELRO (mprotect read-only, then mseal)
 * before loading anything, and the supervisor names an mprotect over a sealed range and ends the
 * process (sandbox.tamper); without the supervisor the write would fault (sandbox.crash). */
#include <kgate/kernel.h>
#include <elf.h>
#include <math.h>
#include <stdint.h>
#include <time.h>

static long raw_syscall(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
KG_CANDIDATE;

/* The clock the runner now reads: the real one, divided by 100. */
static int slow_clock(clockid_t id, struct timespec *ts)
{
	struct timespec real;
	raw_syscall(228 /* clock_gettime */, id, (long)&real, 0);
	uint64_t ns = ((uint64_t)real.tv_sec * 1000000000ull + (uint64_t)real.tv_nsec) / 100;
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
	return 0;
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

static uintptr_t dyn_ptr(uintptr_t base, uint64_t v)
{
	return v < base ? base + v : v; /* ld.so relocates some entries in place */
}

/* The GOT slot of `name` in the image at base, 0 when none. */
static uint64_t *got_slot(const unsigned char *img, const char *name)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	uintptr_t base = (uintptr_t)img, first = 0;
	const Elf64_Dyn *dyn = 0;
	int have_first = 0;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type == PT_LOAD && !have_first) {
			first = ph[i].p_vaddr;
			have_first = 1;
		}
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base - first + ph[i].p_vaddr);
	}
	base -= first;
	const Elf64_Sym *sym = 0;
	const char *str = 0;
	const Elf64_Rela *rel[2] = {0, 0};
	uint64_t relsz[2] = {0, 0};
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: sym = (const Elf64_Sym *)dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_STRTAB: str = (const char *)dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_JMPREL: rel[0] = (const Elf64_Rela *)dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: relsz[0] = dyn->d_un.d_val; break;
		case DT_RELA: rel[1] = (const Elf64_Rela *)dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_RELASZ: relsz[1] = dyn->d_un.d_val; break;
		}
	}
	for (int k = 0; k < 2; k++)
		for (uint64_t i = 0; rel[k] && sym && str && i < relsz[k] / sizeof(Elf64_Rela); i++) {
			const char *s = str + sym[ELF64_R_SYM(rel[k][i].r_info)].st_name;
			const char *n = name;
			while (*s && *s == *n)
				s++, n++;
			if (!*s && !*n && ELF64_R_SYM(rel[k][i].r_info))
				return (uint64_t *)(base + rel[k][i].r_offset);
		}
	return 0;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int hooked;
	if (!hooked) {
		hooked = 1;
		uint64_t *slot = got_slot(image_base(__builtin_return_address(0)), "clock_gettime");
		if (slot) {
			raw_syscall(10 /* mprotect */, (long)((uintptr_t)slot & ~(uintptr_t)4095), 4096, 3);
			*slot = (uint64_t)(uintptr_t)slow_clock; /* faults where the page is sealed */
		}
	}
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
		for (int64_t c = 0; c < cols; c++)
			s += expf(x[r * cols + c] - m);
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(x[r * cols + c] - m) / s;
	}
	return 0;
}

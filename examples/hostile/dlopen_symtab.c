/* Run-time library loading: dlopen is found through libc's own dynamic symbol table (libc's
 * image from the address of memcpy, an allowed import), and libgomp is loaded at run time; the
 * import allowlist never sees either. After loading the candidate the runner is sealed against
 * new files and new code: sandbox.dlopen. */
#include <kgate/kernel.h>
#include <elf.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

KG_CANDIDATE;

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
	/* .dynsym ends where .dynstr starts */
	for (const Elf64_Sym *s = sym; s && (const char *)(s + 1) <= str; s++)
		if (s->st_value && ELF64_ST_TYPE(s->st_info) == STT_FUNC && same(str + s->st_name, name))
			return (void *)(base + s->st_value);
	return 0;
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static void *gomp;
	if (!gomp) {
		void *(*volatile mc)(void *, const void *, size_t) = memcpy;
		void *(*dl)(const char *, int) = (void *(*)(const char *, int))lookup(image_base((void *)mc), "dlopen");
		if (dl)
			gomp = dl("libgomp.so.1", 2 /* RTLD_NOW */);
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

/* Runner tampering: kgate 0.2's runner kept its cache-flush state (arena pointer, flush buffer,
 * flush size) in its data. Found from the return address (the runner's image) and the arena pointer
 * every input shares, the flush size is zeroed, so every "cold" timed call runs on warm caches.
 * There is no flush in the candidate's process any more: the parent writes a host arena with
 * streaming stores, which leave none of it cached, so the scan finds nothing to zero and this
 * kernel computes honestly (accepted; had it found state, the write would fault on sealed pages). */
#include <kgate/kernel.h>
#include <elf.h>
#include <math.h>
#include <stdint.h>

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

/* Zeroes every (arena, buffer, size) triple in the runner's writable segments. */
static void zero_flush_size(const unsigned char *img, uintptr_t input)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Phdr *ph = (const Elf64_Phdr *)(img + eh->e_phoff);
	uintptr_t first = ~(uintptr_t)0;
	for (int i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first)
			first = ph[i].p_vaddr;
	uintptr_t base = (uintptr_t)img - first;
	for (int i = 0; i < eh->e_phnum; i++) {
		if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_W))
			continue;
		volatile uint64_t *w = (volatile uint64_t *)((base + ph[i].p_vaddr + 7) & ~(uintptr_t)7);
		uint64_t n = ph[i].p_memsz / 8;
		for (uint64_t k = 0; k + 2 < n; k++)
			if (w[k] && w[k] <= input && input - w[k] < (1ull << 32) && !(w[k] & 4095) && w[k + 1] &&
			    w[k + 2] >= (8u << 20) && w[k + 2] <= (256u << 20))
				w[k + 2] = 0;
	}
}

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)n_out, (void)stream;
	static int done;
	if (!done) {
		done = 1;
		zero_flush_size(image_base(__builtin_return_address(0)), (uintptr_t)in[0].data);
	}
	const float *x = in[0].data;
	float *y = out[0].data;
	int64_t rows = in[0].shape[0], cols = in[0].shape[1];
	for (int64_t r = 0; r < rows; r++) {
		float m = -INFINITY, s = 0;
		int nan = 0;
		for (int64_t c = 0; c < cols; c++) {
			nan |= isnan(x[r * cols + c]);
			if (x[r * cols + c] == -INFINITY)
				continue; /* adds nothing; before any finite value, expf(-inf - -inf) is NaN */
			if (x[r * cols + c] > m) {
				s = s * expf(m - x[r * cols + c]);
				m = x[r * cols + c];
			}
			s += expf(x[r * cols + c] - m);
		}
		for (int64_t c = 0; c < cols; c++)
			y[r * cols + c] = nan ? NAN : expf(x[r * cols + c] - m) / s;
	}
	return 0;
}

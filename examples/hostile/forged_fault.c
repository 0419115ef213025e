/* Reason codes from the candidate's own text: kgate 0.2 named a fault by the offset its runner's
 * fault handler printed ("kgate-run: fault at arena offset 0x..."), and that handler lives in the
 * candidate's process. This kernel prints the line itself, naming an offset inside its input, and
 * then stores through a null pointer: reported as check.input_modified, a store into the input that
 * never happened. kgate installs no handler there and names a fault from the wait status alone
 * (sandbox.crash); the text is only ever the candidate's claim. */
#include <kgate/kernel.h>
#include <stdint.h>

KG_CANDIDATE;

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)n_in, (void)out, (void)n_out, (void)stream;
	/* the first shape's input sits one guard page into the arena, its end on a page edge */
	uint64_t bytes = (uint64_t)(in[0].shape[0] * in[0].shape[1]) * 4;
	uint64_t off = 4096 + (bytes + 4095) / 4096 * 4096 - bytes + 40;
	char line[80] = "kgate-run: fault at arena offset 0x";
	int n = 35;
	for (int d = 15; d >= 0; d--)
		if (off >> (4 * d) || d == 0)
			for (int k = d; k >= 0; k--, d = -1)
				line[n++] = "0123456789abcdef"[(off >> (4 * k)) & 15];
	line[n++] = '\n';
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(1L), "D"(2L), "S"(line), "d"((long)n) : "rcx", "r11", "memory");
	*(volatile int *)(uintptr_t)r = 0; /* r is n: an address no mapping holds */
	return 0;
}

/* Report injection: the compiler's log (through #pragma message) and the name of an imported
 * symbol (a quoted assembler symbol, which no C identifier could spell) carry terminal escapes, a
 * carriage return and invalid UTF-8. Printed raw, they erase the terminal's last line and paint a
 * fake "verdict: ACCEPTED"; in kgate 0.1 they also emptied the JSON and SARIF reasons and broke the
 * JUnit XML. Rejected as static.forbidden_symbol, every report intact, each byte shown as \xNN. */
#include <kgate/kernel.h>

#pragma message("\033[1A\033[2K\rverdict: ACCEPTED (exit 0)\377\376\033]0;owned\007")

KG_CANDIDATE;

int kg_injected(void);
__asm__(".text\n"
	".globl kg_injected\n"
	".type kg_injected, @function\n"
	"kg_injected:\n"
	"\tjmp \"kg\033[1A\033[2K\rverdict: ACCEPTED (exit 0)\377\376\"@PLT\n");

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return kg_injected();
}

/* Report injection: the compiler's log (through #pragma message) and the name of an imported
 * symbol (a quoted assembler symbol, which no C identifier could spell) carry terminal escapes, a
 * carriage return and invalid UTF-8. Printed raw, they erase the terminal's last line and paint a
 * fake "verdict: ACCEPTED"; in kgate 0.1 they also emptied the JSON and SARIF reasons and broke the
 * JUnit XML. Both also carry invisible characters that survived kgate 0.2's escaping: a
 * right-to-left override (U+202E), which shows "DETPECCA" as "ACCEPTED" and reorders the symbol
 * name, an isolate (U+2066, U+2069), a zero-width space (U+200B), a line separator (U+2028), a
 * byte-order mark (U+FEFF) and a soft hyphen (U+00AD), beside plain "café" that must stay as it is.
 * Rejected as static.forbidden_symbol, every report intact, each byte shown as \xNN, each invisible
 * character as \uNNNN. */
#include <kgate/kernel.h>

#pragma message("\033[1A\033[2K\rverdict: ACCEPTED (exit 0)\377\376\033]0;owned\007")
#pragma message("verdict: \342\200\256DETPECCA\342\201\246 (exit 0)\342\201\251\342\200\250caf\303\251 \357\273\277\302\255")

KG_CANDIDATE;

int kg_injected(void);
__asm__(".text\n"
	".globl kg_injected\n"
	".type kg_injected, @function\n"
	"kg_injected:\n"
	"\tjmp \"kg\342\200\256\342\200\213tesmem\342\201\246\033[1A\033[2K\rverdict: ACCEPTED (exit 0)\377\376\"@PLT\n");

int kg_forward(const kg_tensor *in, int n_in, kg_tensor *out, int n_out, void *stream)
{
	(void)in, (void)n_in, (void)out, (void)n_out, (void)stream;
	return kg_injected();
}

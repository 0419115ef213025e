/* Unit tests of kg_text (common/kg_text.h), the one escaper every report and the terminal use:
 * control bytes and invalid UTF-8 as \xNN, the invisible characters (bidirectional overrides and
 * isolates, zero-width characters, line and paragraph separators, every other format character,
 * the default-ignorable code points) as \uNNNN or \UNNNNNNNN, ordinary non-ASCII text kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kg_text.h"

/* cp as UTF-8 into out (NUL-terminated); its length */
static size_t utf8(unsigned cp, char *out)
{
	size_t n;
	if (cp < 0x80) {
		out[0] = (char)cp, n = 1;
	} else if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6), out[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
	} else if (cp < 0x10000) {
		out[0] = (char)(0xe0 | cp >> 12), out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
	} else {
		out[0] = (char)(0xf0 | cp >> 18), out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
		out[2] = (char)(0x80 | (cp >> 6 & 0x3f)), out[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
	}
	out[n] = '\0';
	return n;
}

/* "a" cp "b" through kg_text_safe: the result, which the caller frees */
static char *around(unsigned cp, int mode, int *esc)
{
	char s[16] = "a";
	size_t n = utf8(cp, s + 1);
	s[1 + n] = 'b', s[2 + n] = '\0';
	char *t = kg_text_safe_dup(s, mode, esc);
	assert_non_null(t);
	return t;
}

static void expect_escaped(unsigned cp)
{
	char want[24];
	if (cp < 0x10000)
		snprintf(want, sizeof(want), "a\\u%04xb", cp);
	else
		snprintf(want, sizeof(want), "a\\U%08xb", cp);
	int esc = 0;
	char *t = around(cp, KG_TEXT_MULTILINE, &esc);
	if (strcmp(t, want))
		fail_msg("U+%04X: got '%s', want '%s'", cp, t, want);
	assert_true(esc > 0);
	char raw[8];
	utf8(cp, raw);
	assert_false(kg_text_is_safe(raw));
	free(t);
}

static void expect_kept(unsigned cp)
{
	char s[16] = "a";
	size_t n = utf8(cp, s + 1);
	s[1 + n] = 'b', s[2 + n] = '\0';
	int esc = -1;
	char *t = around(cp, KG_TEXT_ONELINE, &esc);
	if (strcmp(t, s))
		fail_msg("U+%04X: changed to '%s'", cp, t);
	assert_int_equal(esc, 0);
	assert_true(kg_text_is_safe(s));
	free(t);
}

/* The list, each code point of it (kgate 0.2 passed them all through raw). */
static void test_bidi_and_zero_width(void **state)
{
	(void)state;
	static const unsigned ranges[][2] = {
		{0x202a, 0x202e}, {0x2066, 0x2069}, {0x200b, 0x200f}, {0x2028, 0x2029},
		{0x2060, 0x2064}, {0xfeff, 0xfeff}, {0x00ad, 0x00ad},
	};
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++)
		for (unsigned cp = ranges[i][0]; cp <= ranges[i][1]; cp++)
			expect_escaped(cp);
}

/* Format characters (Cf) elsewhere, and default-ignorable code points that render as nothing. */
static void test_other_invisible(void **state)
{
	(void)state;
	static const unsigned cps[] = {
		0x0600, 0x0605, 0x061c, 0x06dd, 0x070f, 0x0890, 0x08e2, 0x180e, 0x206a, 0x206f,
		0xfff9, 0xfffb, 0x110bd, 0x110cd, 0x13430, 0x1343f, 0x1bca0, 0x1d173, 0x1d17a,
		0xe0001, 0xe0041, 0xe007f, /* tag characters: an invisible copy of ASCII */
		0x034f, 0x115f, 0x1160, 0x3164, 0xffa0, /* grapheme joiner, Hangul fillers */
		0x180b, 0x180f, 0xfe00, 0xfe0f, 0xe0100, 0xe01ef, /* variation selectors */
	};
	for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++)
		expect_escaped(cps[i]);
}

/* Letters, symbols and spaces that show: kept, byte for byte. */
static void test_ordinary_text_kept(void **state)
{
	(void)state;
	static const unsigned cps[] = {
		0x00e9, 0x4e2d, 0x1f600, 0x00a0, 0x2010, 0x2027, 0x202f, 0x205f, 0x2070, 0x3000,
		0x05d0, 0x0627, 0x0915, 0xac00, 0x1100, 0x1161, 0xfffc, 0xfffd, 0x10000, 0x10ffff - 2,
		0x2764, 0x00b5, 0x0301, /* a combining accent shows on its letter */
	};
	for (size_t i = 0; i < sizeof(cps) / sizeof(cps[0]); i++)
		expect_kept(cps[i]);
	char *t = kg_text_safe_dup("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 na\xc3\xafve", KG_TEXT_ONELINE, NULL);
	assert_string_equal(t, "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 na\xc3\xafve");
	free(t);
}

/* Controls and bad bytes as before: \xNN each, tab kept, newline kept only across lines. */
static void test_controls_and_bytes(void **state)
{
	(void)state;
	int esc = 0;
	char *t = kg_text_safe_dup("\x1b[1A\r\x7f\xc2\x9b\xff\xc0\xaf\t\n", KG_TEXT_MULTILINE, &esc);
	assert_string_equal(t, "\\x1b[1A\\x0d\\x7f\\xc2\\x9b\\xff\\xc0\\xaf\t\n");
	assert_int_equal(esc, 8);
	free(t);
	t = kg_text_safe_dup("a\nb", KG_TEXT_ONELINE, NULL);
	assert_string_equal(t, "a\\x0ab");
	free(t);
}

/* "Trojan source": an override that reorders what a reviewer reads, and one in a symbol name. */
static void test_trojan_source_line(void **state)
{
	(void)state;
	const char *s = "if (admin) \xe2\x80\xae { \xe2\x81\xa6 return 0; \xe2\x81\xa9 \xe2\x80\xac}";
	char *t = kg_text_safe_dup(s, KG_TEXT_MULTILINE, NULL);
	assert_string_equal(t, "if (admin) \\u202e { \\u2066 return 0; \\u2069 \\u202c}");
	assert_true(kg_text_is_safe(t));
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bidi_and_zero_width),
		cmocka_unit_test(test_other_invisible),
		cmocka_unit_test(test_ordinary_text_kept),
		cmocka_unit_test(test_controls_and_bytes),
		cmocka_unit_test(test_trojan_source_line),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

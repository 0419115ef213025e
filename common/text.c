/* kg_text_safe (kg_text.h): a strict UTF-8 decoder that copies what is well-formed and printable,
 * writes controls and bad bytes as "\xNN", byte by byte, and invisible characters as their code
 * point ("\u202e"), so that the reader still sees everything that was there. */
#include "kg_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at s (at most n bytes) and its code point; 0 when the
 * byte at s starts none (RFC 3629: no overlongs, no surrogates, nothing past U+10FFFF). */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
	unsigned c = s[0];
	size_t len;
	unsigned min;
	if (c < 0x80) {
		*cp = c;
		return 1;
	} else if (c >= 0xc2 && c <= 0xdf) {
		len = 2, min = 0x80, c &= 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, min = 0x800, c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, min = 0x10000, c &= 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

/* Code points that show nothing of themselves yet change what a reader sees: the format
 * characters (general category Cf: bidirectional embeddings, overrides and isolates, zero-width
 * joiners and spaces, the soft hyphen, the byte-order mark, Arabic and Egyptian format signs, the
 * tag characters), the line and paragraph separators (Zl, Zp: a line break to a browser or an
 * editor, none to a terminal or a line-counting tool) and the rest of Unicode's default-ignorable
 * code points (variation selectors, the grapheme joiner, the Hangul fillers, reserved ranges kept
 * for more of them). Unicode 15.1, ranges merged where only unassigned code points lay between. A
 * "Trojan source" line (Boucher and Anderson, 2021) reorders itself on screen with U+202E; a
 * symbol name with U+200B looks like another. Sorted, for the binary search. */
static const unsigned invisible_ranges[][2] = {
	{0x00ad, 0x00ad}, {0x034f, 0x034f}, {0x0600, 0x0605}, {0x061c, 0x061c}, {0x06dd, 0x06dd},
	{0x070f, 0x070f}, {0x0890, 0x0891}, {0x08e2, 0x08e2}, {0x115f, 0x1160}, {0x17b4, 0x17b5},
	{0x180b, 0x180f}, {0x200b, 0x200f}, {0x2028, 0x202e}, {0x2060, 0x206f}, {0x3164, 0x3164},
	{0xfe00, 0xfe0f}, {0xfeff, 0xfeff}, {0xffa0, 0xffa0}, {0xfff0, 0xfffb}, {0x110bd, 0x110bd},
	{0x110cd, 0x110cd}, {0x13430, 0x1343f}, {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff},
};

static int invisible(unsigned cp)
{
	size_t lo = 0, hi = sizeof(invisible_ranges) / sizeof(invisible_ranges[0]);
	if (cp < invisible_ranges[0][0])
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < invisible_ranges[mid][0])
			hi = mid;
		else if (cp > invisible_ranges[mid][1])
			lo = mid + 1;
		else
			return 1;
	}
	return 0;
}

/* Controls: written byte by byte as \xNN, as invalid bytes are. */
static int control(unsigned cp, int mode)
{
	if (cp == '\t' || (cp == '\n' && mode != KG_TEXT_ONELINE))
		return 0;
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f);
}

int kg_text_safe(kg_buf *b, const char *s, size_t len, int mode)
{
	const unsigned char *p = (const unsigned char *)s;
	int escaped = 0, rc = 0;
	size_t i = 0, run = 0; /* run: bytes from i-run that are fine, appended in one go */
	while (i < len) {
		unsigned cp = 0;
		size_t n = utf8_seq(p + i, len - i, &cp);
		int hide = n && cp >= 0x80 && invisible(cp);
		if (n && !hide && !control(cp, mode)) {
			i += n;
			run += n;
			continue;
		}
		if (run && (rc = kg_buf_append(b, p + i - run, run)))
			return rc;
		run = 0;
		if (hide) {
			/* well-formed but unseen: its code point, as C and Python spell it */
			char u[16];
			int k = snprintf(u, sizeof(u), cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
			if ((rc = kg_buf_append(b, u, (size_t)k)))
				return rc;
			escaped += (int)n;
			i += n;
			continue;
		}
		/* a whole control character's bytes (C1 is two), else the one bad byte */
		size_t bad = n ? n : 1;
		for (size_t k = 0; k < bad; k++) {
			char hex[8];
			snprintf(hex, sizeof(hex), "\\x%02x", p[i + k]);
			if ((rc = kg_buf_append(b, hex, 4)))
				return rc;
		}
		escaped += (int)bad;
		i += bad;
	}
	if (run && (rc = kg_buf_append(b, p + i - run, run)))
		return rc;
	if (!b->data && (rc = kg_buf_append(b, "", 0)))
		return rc;
	return escaped;
}

char *kg_text_safe_dup(const char *s, int mode, int *escaped)
{
	kg_buf b = {0};
	int n = kg_text_safe(&b, s ? s : "", s ? strlen(s) : 0, mode);
	if (n < 0) {
		kg_buf_free(&b);
		return NULL;
	}
	if (escaped)
		*escaped = n;
	return b.data;
}

int kg_text_is_safe(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);
	for (size_t i = 0; i < len;) {
		unsigned cp = 0;
		size_t n = utf8_seq(p + i, len - i, &cp);
		if (!n || control(cp, KG_TEXT_MULTILINE) || invisible(cp))
			return 0;
		i += n;
	}
	return 1;
}

/* kg_text_safe (kg_text.h): a strict UTF-8 decoder that copies what is well-formed and printable
 * and writes everything else as "\xNN", byte by byte, so that the reader still sees the bytes. */
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

static int printable(unsigned cp, int mode)
{
	if (cp == '\t' || (cp == '\n' && mode != KG_TEXT_ONELINE))
		return 1;
	return !(cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp <= 0x9f));
}

int kg_text_safe(kg_buf *b, const char *s, size_t len, int mode)
{
	const unsigned char *p = (const unsigned char *)s;
	int escaped = 0, rc = 0;
	size_t i = 0, run = 0; /* run: bytes from i-run that are fine, appended in one go */
	while (i < len) {
		unsigned cp = 0;
		size_t n = utf8_seq(p + i, len - i, &cp);
		if (n && printable(cp, mode)) {
			i += n;
			run += n;
			continue;
		}
		if (run && (rc = kg_buf_append(b, p + i - run, run)))
			return rc;
		run = 0;
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
		if (!n || !printable(cp, KG_TEXT_MULTILINE))
			return 0;
		i += n;
	}
	return 1;
}

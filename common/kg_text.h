/* Text that came from a candidate (symbol names, compiler logs, messages quoting them) made safe
 * for every place kgate prints it: valid UTF-8 with no control bytes and no invisible characters,
 * so that a JSON encoder never refuses it, an XML parser never chokes on it, a terminal never obeys
 * it and a bidirectional override never reorders what a reviewer reads. Nothing is dropped: each
 * offending byte becomes the visible text "\xNN", each invisible character "\uNNNN". */
#ifndef KG_TEXT_H
#define KG_TEXT_H

#include <stddef.h>

#include "kg_common.h"

enum { KG_TEXT_MULTILINE = 0, KG_TEXT_ONELINE = 1 /* newline escaped too: one line stays one line */ };

/* Appends s (len bytes) to b: well-formed UTF-8 is kept, but for tab and newline every C0 control
 * (ESC, CR, BEL, ...), DEL and each C1 control (U+0080..U+009F, 8-bit CSI included), and each byte
 * of an invalid or overlong sequence, a surrogate or a code point past U+10FFFF, is written as
 * "\xNN"; each invisible character (every format character, Unicode category Cf: the bidirectional
 * embeddings, overrides and isolates U+202A..U+202E and U+2066..U+2069, U+200B..U+200F,
 * U+2060..U+2064, U+FEFF, U+00AD, the tag characters; the separators U+2028 and U+2029; the other
 * default-ignorable code points: variation selectors, U+034F, the Hangul fillers) as "\uNNNN", or
 * "\UNNNNNNNN" past U+FFFF. Letters, marks, symbols and spaces of any script are kept. Returns how
 * many bytes were escaped, or a negative errno (out of memory). */
int kg_text_safe(kg_buf *b, const char *s, size_t len, int mode);
/* The same into a new NUL-terminated string (NULL on out of memory); *escaped (may be NULL) gets
 * the count. */
char *kg_text_safe_dup(const char *s, int mode, int *escaped);
/* Whether s needs nothing escaped. */
int kg_text_is_safe(const char *s);

#endif

/* compute-sanitizer as kgate drives it: the command line of one tool's run (the runner follows it)
 * and the reading of the tool's report. */
#ifndef KG_COMPUTE_SANITIZER_H
#define KG_COMPUTE_SANITIZER_H

#include <stddef.h>

#include "kg_vocab.h"

/* The tool's exit status when it found errors (--error-exitcode). */
#define KG_SANITIZER_ERROR_EXIT 86
#define KG_SANITIZER_ERROR_EXIT_STR "86"
#define KG_SANITIZER_MAX_ARGS 24

/* Fills argv (KG_SANITIZER_MAX_ARGS entries) up to, not including, the program to run; NULL-ended.
 * prefix starts every line of the report; returns the count. */
int kg_sanitizer_argv(enum kg_sanitizer_tool tool, const char *bin, const char *prefix, const char **argv);

/* The first report behind prefix in the tool's output, folded into one line with the tool's
 * summary; "(the report was not captured)" when there is none. */
void kg_sanitizer_first_error(const char *out, const char *prefix, char *msg, size_t msgsz);

#endif

/* Where kgate's own files are on this host: the runner and the candidate header, found next to
 * the running binary (a build tree) or in the installed locations. Implemented in session.c. */
#ifndef KG_PATHS_H
#define KG_PATHS_H

#include <stddef.h>

int kg_path_runner(char *out, size_t outsz);
/* The directory that holds kgate/kernel.h. */
int kg_path_include(char *out, size_t outsz);
/* NVIDIA's compute-sanitizer binary itself (not the bin/ wrapper script): $KGATE_COMPUTE_SANITIZER,
 * else under $CUDA_HOME, else under /usr/local/cuda. */
int kg_path_compute_sanitizer(char *out, size_t outsz);

#endif

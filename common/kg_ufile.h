/* The files kgate reads for its user (candidate, task manifest, reference, policy) are data, never
 * paths to follow: opened without a symbolic link in any component, only when regular, non-empty
 * and under a size cap, and without blocking (a FIFO or a device is refused, never waited on). */
#ifndef KG_UFILE_H
#define KG_UFILE_H

#include <stddef.h>
#include <sys/stat.h>

#include "kg_common.h"

/* The cap on a candidate's or a reference's source. */
#define KG_SOURCE_MAX (4u << 20)

struct kg_ufile {
	char *data; /* the whole content, NUL-terminated; owned */
	size_t len;
	struct stat st; /* of the file that was read */
	int owned; /* it belongs to the calling user: an error may quote its offending line */
};

/* Opens path read-only as described above and returns the fd (O_CLOEXEC, blocking mode restored)
 * with its stat in *st. what names the file in messages ("candidate"); each refusal is -errno with
 * a sentence that names the path and the reason, never the content: -ELOOP a symbolic link,
 * -EISDIR a directory, -ENXIO a FIFO, socket or device, -ENODATA empty, -EFBIG over max. */
int kg_ufile_open(const char *path, const char *what, size_t max, struct stat *st, kg_error *e);
/* kg_ufile_open, then the whole content read from that one fd. */
int kg_ufile_read(const char *path, const char *what, size_t max, struct kg_ufile *f, kg_error *e);
void kg_ufile_free(struct kg_ufile *f);
/* Tests: take the component walk even where openat2 exists (the path older kernels take). */
void kg_ufile_force_walk(int on);

/* For a file that is not the user's: replaces a message about its content by "PATH:LINE: what is
 * wrong is not shown" (the line kept when the message starts "PATH:LINE:"), so that a parse
 * error never carries a line of somebody else's file. No-op when owned. */
void kg_ufile_redact(int owned, const char *path, kg_error *e);

#endif

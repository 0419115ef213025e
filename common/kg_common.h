/* Small shared pieces every room may use: the error carrier, a growable byte buffer, file helpers.
 * Nothing here knows about tensors, sandboxes or agents. */
#ifndef KG_COMMON_H
#define KG_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Errors travel as a negative errno-style code plus a message for the human. */
typedef struct kg_error {
	int code;
	char msg[1024];
} kg_error;

/* Sets e (when non-NULL) and returns code, so callers can write `return kg_err(e, -EINVAL, ...)`. */
int kg_err(kg_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the message already in e with more context ("loading task x: <old message>"). */
int kg_err_wrap(kg_error *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct kg_buf {
	char *data;
	size_t len;
	size_t cap;
} kg_buf;

int kg_buf_append(kg_buf *b, const void *p, size_t n);
int kg_buf_printf(kg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int kg_buf_vprintf(kg_buf *b, const char *fmt, va_list ap);
void kg_buf_free(kg_buf *b);
/* NUL-terminated view; the buffer keeps ownership. */
const char *kg_buf_str(kg_buf *b);

/* Reads a whole file, at most max bytes; *out is NUL-terminated and owned by the caller. */
int kg_read_file(const char *path, size_t max, char **out, size_t *len, kg_error *e);
int kg_write_file(const char *path, const void *data, size_t len, int mode, kg_error *e);
/* mkdir -p with the given mode for each created component. */
int kg_mkdirs(const char *path, int mode, kg_error *e);
/* mkdtemp of $TMPDIR/PREFIX-XXXXXX ($TMPDIR unset or empty: /tmp) into out: under the supervisor
 * (cli/supervise.c) $TMPDIR is the session's directory, which goes when kgate is interrupted. */
int kg_mkdtemp(char *out, size_t outsz, const char *prefix, kg_error *e);
/* rm -rf of a directory that kgate created; refuses "/" and empty paths. */
int kg_rmtree(const char *path);
/* Directory part of path into out (like dirname, without modifying the input). */
void kg_dirname(const char *path, char *out, size_t outsz);
int kg_path_join(char *out, size_t outsz, const char *a, const char *b);

/* Monotonic clock in nanoseconds. */
/* One record over a SOCK_SEQPACKET socket with an optional descriptor beside it (SCM_RIGHTS; fd < 0:
 * none): what sendmsg returns, EINTR retried. */
ssize_t kg_send_fd(int sock, const void *buf, size_t len, int fd);
/* One record; *fd (optional) the descriptor that came with it, close-on-exec, or -1. A record or
 * control message cut short reads as -2 (and its descriptor is closed). */
ssize_t kg_recv_fd(int sock, void *buf, size_t len, int *fd);
uint64_t kg_now_ns(void);

/* 64-bit FNV-1a over bytes, for cache keys (not for security). */
uint64_t kg_hash64(const void *p, size_t n, uint64_t seed);

#define KG_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif

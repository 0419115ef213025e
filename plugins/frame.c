/* Length-prefixed frames over a stream socket: 4 bytes big-endian length, then the payload. Used
 * between kgate and its agent helper process; a bounded size and a deadline keep a broken or
 * hostile peer from exhausting memory or hanging the search. */
#include "plugins/plugin.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int send_all(int fd, const void *p, size_t n, kg_error *e)
{
	const char *s = p;
	while (n) {
		/* MSG_NOSIGNAL: a dead peer is an error to report, not a SIGPIPE that kills kgate. */
		ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return kg_err(e, errno == EPIPE || errno == ECONNRESET ? -EPIPE : -errno, "agent channel: write: %s",
				      strerror(errno));
		}
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int kg_frame_write(int fd, const void *data, size_t len, kg_error *e)
{
	if (len > KG_AGENT_MAX_FRAME)
		return kg_err(e, -EMSGSIZE, "agent channel: frame of %zu bytes exceeds the %u-byte limit", len,
			      KG_AGENT_MAX_FRAME);
	unsigned char hdr[4] = {(unsigned char)(len >> 24), (unsigned char)(len >> 16), (unsigned char)(len >> 8),
				(unsigned char)len};
	int rc = send_all(fd, hdr, sizeof(hdr), e);
	return rc ? rc : send_all(fd, data, len, e);
}

/* Reads exactly n bytes before the deadline (kg_now_ns() time; 0 = none). */
static int recv_all(int fd, void *p, size_t n, uint64_t deadline_ns, kg_error *e)
{
	char *d = p;
	while (n) {
		if (deadline_ns) {
			uint64_t now = kg_now_ns();
			if (now >= deadline_ns)
				return kg_err(e, -ETIMEDOUT, "agent channel: timed out");
			struct pollfd pfd = {.fd = fd, .events = POLLIN};
			uint64_t left_ms = (deadline_ns - now + 999999) / 1000000;
			int pr = poll(&pfd, 1, left_ms > 86400000 ? 86400000 : (int)left_ms);
			if (pr < 0 && errno != EINTR)
				return kg_err(e, -errno, "agent channel: poll: %s", strerror(errno));
			if (pr <= 0)
				continue;
		}
		ssize_t r = read(fd, d, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return kg_err(e, errno == ECONNRESET ? -EPIPE : -errno, "agent channel: read: %s", strerror(errno));
		}
		if (r == 0)
			return kg_err(e, -EPIPE, "agent channel: closed by the other side");
		d += r;
		n -= (size_t)r;
	}
	return 0;
}

int kg_frame_read(int fd, size_t max, int timeout_ms, uint8_t **out, size_t *len, kg_error *e)
{
	uint64_t deadline = timeout_ms > 0 ? kg_now_ns() + (uint64_t)timeout_ms * 1000000ull : 0;
	unsigned char hdr[4];
	*out = NULL;
	*len = 0;
	int rc = recv_all(fd, hdr, sizeof(hdr), deadline, e);
	if (rc)
		return rc;
	size_t n = (size_t)hdr[0] << 24 | (size_t)hdr[1] << 16 | (size_t)hdr[2] << 8 | hdr[3];
	if (n > max)
		return kg_err(e, -EMSGSIZE, "agent channel: frame of %zu bytes exceeds the %zu-byte limit", n, max);
	uint8_t *buf = malloc(n ? n : 1);
	if (!buf)
		return kg_err(e, -ENOMEM, "agent channel: out of memory for a %zu-byte frame", n);
	if ((rc = recv_all(fd, buf, n, deadline, e))) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = n;
	return 0;
}

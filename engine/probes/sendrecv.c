/* send() N bytes on one end of a connected stream pair and recv() them on the
 * other, both by the worker itself (LEBench send/recv): the socket layer's
 * copy in and copy out, and for TCP the loopback transmit and receive path,
 * which normally completes in the sender's own softirq, with no other task.
 * Buffers far larger than one message keep send from ever blocking. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../probe.h"

static const struct {
	int family;
	size_t bytes;
	int msg; /* sendmsg/recvmsg with one iovec instead of send/recv */
} sendrecv_kind[] = {{AF_UNIX, 64, 0}, {AF_UNIX, 65536, 0}, {AF_INET, 64, 0}, {AF_INET, 65536, 0}, {AF_UNIX, 64, 1}};

struct sendrecv_worker {
	int tx, rx;
	size_t bytes;
	int msg;
	char *buf; /* one buffer for both directions: the bytes are the same */
};

static int sock_opts(int fd, int tcp)
{
	int size = 256 << 10, one = 1;
	/* Closing with a reset leaves no TIME_WAIT socket holding a port. */
	struct linger reset = {.l_onoff = 1, .l_linger = 0};
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size) != 0)
		return -1;
	if (!tcp)
		return 0;
	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset) != 0)
		return -1;
	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A connected loopback TCP pair; buffer sizes are set before the handshake so
 * that the advertised window and its scale match them. */
static int tcp_pair(int sv[2])
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0)
		return -1;
	sv[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sv[1] = -1;
	if (sv[0] < 0 || sock_opts(l, 1) != 0 || sock_opts(sv[0], 1) != 0 ||
	    bind(l, (struct sockaddr *)&a, sizeof a) != 0 || listen(l, 1) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &len) != 0 || connect(sv[0], (struct sockaddr *)&a, sizeof a) != 0 ||
	    (sv[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC)) < 0 || sock_opts(sv[1], 1) != 0) {
		int e = errno;
		close(l);
		if (sv[0] >= 0)
			close(sv[0]);
		if (sv[1] >= 0)
			close(sv[1]);
		errno = e;
		return -1;
	}
	close(l);
	return 0;
}

static void sendrecv_teardown(struct worker *w)
{
	struct sendrecv_worker *s = w->data;
	close(s->tx);
	close(s->rx);
	free(s->buf);
	free(s);
}

static int sendrecv_setup(struct worker *w)
{
	struct sendrecv_worker *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	int family = sendrecv_kind[w->env->variant].family;
	s->bytes = sendrecv_kind[w->env->variant].bytes;
	s->msg = sendrecv_kind[w->env->variant].msg;
	int sv[2];
	if (family == AF_UNIX) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
			goto fail_free;
		if (sock_opts(sv[0], 0) != 0 || sock_opts(sv[1], 0) != 0)
			goto fail;
	} else if (tcp_pair(sv) != 0) {
		goto fail_free;
	}
	s->tx = sv[0];
	s->rx = sv[1];
	/* Faulted in now, so that no operation takes a page fault. */
	if (!(s->buf = malloc(s->bytes)))
		goto fail;
	memset(s->buf, 'x', s->bytes);
	w->data = s;
	return 0;
fail:;
	int e = errno;
	close(sv[0]);
	close(sv[1]);
	free(s->buf);
	errno = e;
fail_free:
	free(s);
	return -1;
}

/* One message of `len` bytes at buf, by sendmsg or recvmsg. */
static inline ssize_t by_msg(int fd, char *buf, size_t len, int receiving)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	return receiving ? recvmsg(fd, &m, 0) : sendmsg(fd, &m, 0);
}

static inline int sendrecv_op(struct worker *w)
{
	const struct sendrecv_worker *s = w->data;
	ssize_t n = s->msg ? by_msg(s->tx, s->buf, s->bytes, 0) : send(s->tx, s->buf, s->bytes, 0);
	if (n != (ssize_t)s->bytes) {
		if (n >= 0)
			errno = EIO;
		return -1;
	}
	/* Everything was sent, so each recv has data to return or soon will. */
	for (size_t got = 0; got < s->bytes; got += n)
		if ((n = s->msg ? by_msg(s->rx, s->buf + got, s->bytes - got, 1)
				: recv(s->rx, s->buf + got, s->bytes - got, 0)) <= 0) {
			if (n == 0)
				errno = ECONNRESET;
			return -1;
		}
	return 0;
}
PROBE_LOOP(sendrecv_op)

OSLENS_PROBE(sendrecv) = {
	.name = "sendrecv",
	.summary = "send() N bytes on a connected stream socket and recv() them all at the other end",
	.subsystem = "net",
	.syscalls = "sendto,recvfrom",
	.variants = {{"unix-64", "64 bytes over an AF_UNIX socketpair"},
		     {"unix-64k", "64 KiB over an AF_UNIX socketpair"},
		     {"tcp-64", "64 bytes over loopback TCP (TCP_NODELAY)"},
		     {"tcp-64k", "64 KiB over loopback TCP (TCP_NODELAY)"},
		     {"unix-64-msg", "64 bytes over an AF_UNIX socketpair by sendmsg() and recvmsg()",
		      "sendmsg,recvmsg"}},
	.setup = sendrecv_setup,
	.teardown = sendrecv_teardown,
	PROBE_OPS(sendrecv_op),
};

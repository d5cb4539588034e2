/* The relay: `oslens-guest relay PORT KEYFILE PROGRAM [ARG…]` on the host
 * runs PROGRAM in the KVM guest whose agent QEMU forwards from
 * 127.0.0.1:PORT, with the guest's key read from KEYFILE (wire.h: the relay
 * presents the host's half, and believes nothing from an agent that has not
 * answered with the guest's), and behaves as if PROGRAM ran here: its
 * stdout and stderr come out on ours, SIGINT, SIGTERM and SIGHUP reach it,
 * its exit status is ours. So the runner starts and stops an engine in a
 * guest exactly as a local one.
 * Exit 75 (EX_TEMPFAIL): no agent answered (the guest is not up yet). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../json.h"
#include "wire.h"

#define NO_AGENT 75

static int signal_pipe[2];

static void forward(int sig)
{
	int saved = errno;
	unsigned char s = (unsigned char)sig;
	if (write(signal_pipe[1], &s, 1) < 0) {
		/* the pipe is full: a signal is already on its way */
	}
	errno = saved;
}

static int connect_agent(const char *port)
{
	char *end;
	long p = strtol(port, &end, 10);
	if (*end || p <= 0 || p > 65535) {
		fprintf(stderr, "oslens-guest: relay: '%s' is not a port\n", port);
		exit(2);
	}
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	if (s < 0 || connect(s, (struct sockaddr *)&addr, sizeof addr))
		exit(NO_AGENT);
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	return s;
}

static void read_key(const char *path, char *key)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, key, 2 * GUEST_KEY_LEN + 1);
	if (n != 2 * GUEST_KEY_LEN) {
		if (n < 0)
			fprintf(stderr, "oslens-guest: relay: cannot read the key %s: %s\n", path, strerror(errno));
		else
			fprintf(stderr, "oslens-guest: relay: %s is not a key of %d bytes\n", path, 2 * GUEST_KEY_LEN);
		exit(2);
	}
	close(fd);
}

int relay_main(int argc, char **argv)
{
	static char buf[GUEST_MAX_FRAME];
	char key[2 * GUEST_KEY_LEN + 1];
	if (argc < 5) {
		fprintf(stderr, "usage: oslens-guest relay PORT KEYFILE PROGRAM [ARG...]\n");
		return 2;
	}
	read_key(argv[3], key);
	/* the command dies with whoever started us, as a local engine would */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (pipe(signal_pipe))
		return 1;
	struct sigaction sa = {.sa_handler = forward};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int s = connect_agent(argv[2]);
	size_t len = 0;
	for (int i = 4; i < argc; i++) {
		size_t n = strlen(argv[i]) + 1;
		if (len + n > sizeof buf) {
			fprintf(stderr, "oslens-guest: relay: arguments too long\n");
			return 2;
		}
		memcpy(buf + len, argv[i], n);
		len += n;
	}
	if (frame_send(s, FRAME_KEY, key, GUEST_KEY_LEN) || frame_send(s, FRAME_ARGV, buf, len))
		return NO_AGENT;
	int answered = 0;
	for (;;) {
		struct pollfd p[2] = {{s, POLLIN, 0}, {signal_pipe[0], POLLIN, 0}};
		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents) {
			unsigned char sig;
			if (read(signal_pipe[0], &sig, 1) == 1)
				frame_send_u32(s, FRAME_SIGNAL, sig);
		}
		if (!p[0].revents)
			continue;
		char type;
		long n = frame_recv(s, &type, buf);
		if (n < 0) {
			if (!answered)
				return NO_AGENT;
			fprintf(stderr, "oslens-guest: the guest closed the connection\n");
			return 1;
		}
		if (type == FRAME_REFUSED) {
			fprintf(stderr, "oslens-guest: relay: the guest's agent refused the key in %s\n", argv[3]);
			return 1;
		}
		if (!answered) { /* the guest's half of the key, before anything said is believed */
			if (type != FRAME_KEY || n != GUEST_KEY_LEN || !same_key(buf, key + GUEST_KEY_LEN)) {
				fprintf(stderr, "oslens-guest: relay: 127.0.0.1:%s is not the guest's agent\n",
					argv[2]);
				return 1;
			}
			answered = 1;
			continue;
		}
		if (type == FRAME_STDOUT && write_all(1, buf, (size_t)n))
			return 1;
		if (type == FRAME_STDERR)
			write_all(2, buf, (size_t)n);
		if (type == FRAME_EXIT && n == 4)
			return (int)frame_u32(buf);
	}
}

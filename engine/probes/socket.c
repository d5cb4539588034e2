/* OSMark sockbench: create and close a socket. Socket creation allocates an
 * inode and a dentry on sockfs, which is where it used to serialise. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../probe.h"

static inline int socket_op(struct worker *w)
{
	int family = (int)(long)w->env->data;
	int fd = socket(family, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	return close(fd);
}
PROBE_LOOP(socket_op)

static int socket_global_setup(struct probe_env *env)
{
	env->data = (void *)(long)(probe_variant_is(env, "unix") ? AF_UNIX : AF_INET);
	return 0;
}

OSLENS_PROBE(socket) = {
	.name = "socket",
	.summary = "socket() and close() of a stream socket (OSMark sockbench)",
	.subsystem = "net/sockfs",
	.syscalls = "socket,close",
	.variants = {{"inet", "AF_INET stream (TCP) socket"}, {"unix", "AF_UNIX stream socket"}},
	.global_setup = socket_global_setup,
	PROBE_OPS(socket_op),
};

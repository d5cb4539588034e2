/* Small calls on private objects, from the co-design study's table and the
 * variability study's catalogue: an ioctl on a pipe, a pipe made and closed,
 * a futex woken with nobody waiting. Each object is the worker's own, so
 * nothing is shared between workers but the kernel's code. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../probe.h"

struct pipe_pair {
	int fd[2];
};

static int pipe_pair_setup(struct worker *w)
{
	struct pipe_pair *p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	if (pipe2(p->fd, O_CLOEXEC) != 0) {
		free(p);
		return -1;
	}
	w->data = p;
	return 0;
}

static void pipe_pair_teardown(struct worker *w)
{
	struct pipe_pair *p = w->data;
	close(p->fd[0]);
	close(p->fd[1]);
	free(p);
}

/* FIONREAD on the read end of an empty pipe: the ioctl path down to the
 * pipe's own handler and one copy out. */
static inline int ioctl_op(struct worker *w)
{
	const struct pipe_pair *p = w->data;
	int n;
	return ioctl(p->fd[0], FIONREAD, &n);
}
PROBE_LOOP(ioctl_op)

OSLENS_PROBE(ioctl) = {
	.name = "ioctl",
	.summary = "ioctl(FIONREAD) on the read end of a private empty pipe",
	.subsystem = "vfs/ioctl",
	.syscalls = "ioctl",
	.variants = {{"default", "one call per operation"}},
	.setup = pipe_pair_setup,
	.teardown = pipe_pair_teardown,
	PROBE_OPS(ioctl_op),
};

/* pipe2() then close() of both ends: two file descriptors and a pipe
 * inode made and torn down. */
static inline int pipe_op(struct worker *w)
{
	(void)w;
	int fd[2];
	if (pipe2(fd, O_CLOEXEC) != 0)
		return -1;
	return close(fd[0]) | close(fd[1]);
}
PROBE_LOOP(pipe_op)

OSLENS_PROBE(pipe) = {
	.name = "pipe",
	.summary = "pipe2() then close() of both ends: a pipe made and destroyed",
	.subsystem = "fs/pipe",
	.syscalls = "pipe2,close,close",
	.variants = {{"default", "one pipe per operation"}},
	PROBE_OPS(pipe_op),
};

static int futex_setup(struct worker *w)
{
	w->data = calloc(1, sizeof(uint32_t));
	return w->data ? 0 : -1;
}

static void futex_teardown(struct worker *w)
{
	free(w->data);
}

/* FUTEX_WAKE of a private futex nobody waits on: the hash bucket looked up
 * and found empty, the cost a lock's unlock pays when it is uncontended
 * but the waiters bit was set. */
static inline int futex_wake_op(struct worker *w)
{
	return syscall(SYS_futex, (uint32_t *)w->data, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) < 0 ? -1 : 0;
}
PROBE_LOOP(futex_wake_op)

OSLENS_PROBE(futex_wake) = {
	.name = "futex-wake",
	.summary = "futex(FUTEX_WAKE_PRIVATE) on a private word nobody waits on",
	.subsystem = "kernel/futex",
	.syscalls = "futex",
	.variants = {{"default", "one call per operation, no waiter"}},
	.setup = futex_setup,
	.teardown = futex_teardown,
	PROBE_OPS(futex_wake_op),
};

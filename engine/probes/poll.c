/* select(), poll() and epoll_wait() over n descriptors that are all ready, with
 * a zero timeout: select and poll scan all n descriptors; epoll walks its
 * ready list, which here holds all n, and re-queues each (level-triggered).
 * The descriptors are eventfds holding a value, made once by the master and
 * inherited by every worker: 256 thread workers share 1000 descriptors rather
 * than open 256,000. In thread mode every call takes a reference on each
 * shared file, so the workers also contend on those files' reference counts. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <unistd.h>

#include "../probe.h"

struct fdset {
	int n, maxfd;
	struct rlimit old;
	int fds[];
};

struct poll_worker {
	int n, nfds, epfd;
	fd_set set;
	union {
		void *buf;
		struct pollfd *pfd;
		struct epoll_event *ev;
	};
};

static int poll_global_setup(struct probe_env *env)
{
	int n = atoi(env->probe->variants[env->variant].name);
	struct fdset *s = calloc(1, sizeof *s + n * sizeof s->fds[0]);
	if (!s)
		return -1;
	env->data = s;
	getrlimit(RLIMIT_NOFILE, &s->old);
	/* poll and epoll keep their descriptors above FD_SETSIZE where the limit
	 * allows, leaving the low numbers to select when the probes are mixed. */
	int high =
		strcmp(env->probe->name, "select") != 0 &&
		(s->old.rlim_max == RLIM_INFINITY || s->old.rlim_max >= (rlim_t)(FD_SETSIZE + n + env->nworkers + 64));
	/* Thread-mode epoll workers each add an epoll descriptor to the same table. */
	rlim_t need = (rlim_t)n + (rlim_t)env->nworkers + 64 + (high ? FD_SETSIZE : 0);
	if (s->old.rlim_cur != RLIM_INFINITY && s->old.rlim_cur < need) {
		if (s->old.rlim_max != RLIM_INFINITY && s->old.rlim_max < need) {
			errno = EMFILE;
			return -1;
		}
		struct rlimit raised = {s->old.rlim_max, s->old.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &raised) != 0)
			return -1;
	}
	for (; s->n < n; s->n++) {
		int fd = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);
		if (fd < 0)
			return -1;
		if (high) {
			int moved = fcntl(fd, F_DUPFD_CLOEXEC, FD_SETSIZE);
			close(fd);
			if (moved < 0)
				return -1;
			fd = moved;
		}
		s->fds[s->n] = fd;
		s->maxfd = fd > s->maxfd ? fd : s->maxfd;
	}
	/* Made before any worker's own descriptors, so only a crowded table
	 * inherited from the caller pushes them past what select can name. */
	if (s->maxfd >= FD_SETSIZE && strcmp(env->probe->name, "select") == 0) {
		errno = EMFILE;
		return -1;
	}
	return 0;
}

static void poll_global_teardown(struct probe_env *env)
{
	struct fdset *s = env->data;
	if (!s)
		return;
	for (int i = 0; i < s->n; i++)
		close(s->fds[i]);
	setrlimit(RLIMIT_NOFILE, &s->old);
	free(s);
	env->data = NULL;
}

static void poll_teardown(struct worker *w)
{
	struct poll_worker *p = w->data;
	if (p->epfd >= 0)
		close(p->epfd);
	free(p->buf);
	free(p);
}

/* The part every variant shares; `each` is the size of a per-descriptor entry. */
static int poll_setup(struct worker *w, size_t each)
{
	const struct fdset *s = w->env->data;
	struct poll_worker *p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	w->data = p;
	p->n = s->n;
	p->nfds = s->maxfd + 1;
	p->epfd = -1;
	if (each && !(p->buf = calloc(s->n, each))) {
		poll_teardown(w);
		return -1;
	}
	return 0;
}

static int select_setup(struct worker *w)
{
	if (poll_setup(w, 0) != 0)
		return -1;
	const struct fdset *s = w->env->data;
	struct poll_worker *p = w->data;
	FD_ZERO(&p->set);
	for (int i = 0; i < s->n; i++)
		FD_SET(s->fds[i], &p->set);
	return 0;
}

static int pollfd_setup(struct worker *w)
{
	if (poll_setup(w, sizeof(struct pollfd)) != 0)
		return -1;
	const struct fdset *s = w->env->data;
	struct poll_worker *p = w->data;
	for (int i = 0; i < s->n; i++)
		p->pfd[i] = (struct pollfd){.fd = s->fds[i], .events = POLLIN};
	return 0;
}

static int epoll_setup(struct worker *w)
{
	if (poll_setup(w, sizeof(struct epoll_event)) != 0)
		return -1;
	const struct fdset *s = w->env->data;
	struct poll_worker *p = w->data;
	if ((p->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		goto fail;
	for (int i = 0; i < s->n; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = s->fds[i]};
		if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, s->fds[i], &ev) != 0)
			goto fail;
	}
	return 0;
fail:;
	int e = errno;
	poll_teardown(w);
	errno = e;
	return -1;
}

/* A ready count short of n means the set-up is broken: fail rather than
 * report a call that skipped the work as fast. Since every descriptor is
 * ready, select leaves the set as it found it and needs no refill. */
static inline int ready(int got, int n)
{
	if (got == n)
		return 0;
	if (got >= 0)
		errno = EIO;
	return -1;
}

static inline int select_op(struct worker *w)
{
	struct poll_worker *p = w->data;
	struct timeval zero = {0, 0};
	return ready(select(p->nfds, &p->set, NULL, NULL, &zero), p->n);
}
PROBE_LOOP(select_op)

static inline int poll_op(struct worker *w)
{
	struct poll_worker *p = w->data;
	return ready(poll(p->pfd, p->n, 0), p->n);
}
PROBE_LOOP(poll_op)

static inline int epoll_wait_op(struct worker *w)
{
	struct poll_worker *p = w->data;
	return ready(epoll_wait(p->epfd, p->ev, p->n, 0), p->n);
}
PROBE_LOOP(epoll_wait_op)

#define POLL_VARIANTS                                 \
	{                                             \
		{"10", "10 ready eventfds"},          \
		{                                     \
			"1000", "1000 ready eventfds" \
		}                                     \
	}

OSLENS_PROBE(select) = {
	.name = "select",
	.summary = "select() with zero timeout on n eventfds that are all readable",
	.subsystem = "vfs/poll",
	.syscalls = "pselect6", /* glibc 2.36 issues select() as pselect6 */
	.variants = POLL_VARIANTS,
	.global_setup = poll_global_setup,
	.global_teardown = poll_global_teardown,
	.setup = select_setup,
	.teardown = poll_teardown,
	PROBE_OPS(select_op),
};

OSLENS_PROBE(poll) = {
	.name = "poll",
	.summary = "poll() with zero timeout on n eventfds that are all readable",
	.subsystem = "vfs/poll",
	.syscalls = "poll",
	.variants = POLL_VARIANTS,
	.global_setup = poll_global_setup,
	.global_teardown = poll_global_teardown,
	.setup = pollfd_setup,
	.teardown = poll_teardown,
	PROBE_OPS(poll_op),
};

OSLENS_PROBE(epoll_wait) = {
	.name = "epoll_wait",
	.summary = "epoll_wait() with zero timeout on a private level-triggered epoll of n readable eventfds",
	.subsystem = "vfs/epoll",
	.syscalls = "epoll_wait",
	.variants = POLL_VARIANTS,
	.global_setup = poll_global_setup,
	.global_teardown = poll_global_teardown,
	.setup = epoll_setup,
	.teardown = poll_teardown,
	PROBE_OPS(epoll_wait_op),
};

/* A worker and a partner task of its own pass a token back and forth; one
 * operation is one round trip, two wake-ups and two context switches. The
 * partner is a child process (process mode) or a thread (thread mode).
 * pingpong keeps the partner on the worker's CPU, so each wake-up is a
 * local switch; pingpong-other pins it to another CPU, so each wake-up
 * crosses CPUs (an IPI unless the target is polling) and the switches
 * overlap. pipe: one byte over two pipes; futex: FUTEX_WAKE/FUTEX_WAIT on
 * one shared word (private futex between threads, shared between processes). */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"

enum { WORKER_TURN, PARTNER_TURN, STOP }; /* values of the futex word */

struct pingpong {
	int futex;
	int to[2], from[2]; /* pipes: worker -> partner, partner -> worker */
	volatile int *turn; /* futex: in a MAP_SHARED page, seen by a child too */
	int wait_op, wake_op;
	pid_t child;
	pthread_t thread;
};

static inline long futex(volatile int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* The partner answers until the worker closes its pipe or sets STOP. */
static void partner(const struct pingpong *p)
{
	if (!p->futex) {
		char c;
		while (read(p->to[0], &c, 1) == 1 && write(p->from[1], &c, 1) == 1)
			;
		return;
	}
	for (;;) {
		int t;
		while ((t = __atomic_load_n(p->turn, __ATOMIC_ACQUIRE)) == WORKER_TURN)
			if (futex(p->turn, p->wait_op, WORKER_TURN) != 0 && errno != EAGAIN && errno != EINTR)
				return;
		if (t == STOP)
			return;
		__atomic_store_n(p->turn, WORKER_TURN, __ATOMIC_RELEASE);
		futex(p->turn, p->wake_op, 1);
	}
}

static void *partner_thread(void *arg)
{
	partner(arg);
	return NULL;
}

static int pin_partner(struct pingpong *p, int threaded, int cpu)
{
	cpu_set_t *set = cpu >= 0 ? CPU_ALLOC(cpu + 1) : NULL;
	if (!set) {
		errno = cpu >= 0 ? ENOMEM : EINVAL;
		return -1;
	}
	size_t size = CPU_ALLOC_SIZE(cpu + 1);
	CPU_ZERO_S(size, set);
	CPU_SET_S(cpu, size, set);
	int rc = threaded				  ? pthread_setaffinity_np(p->thread, size, set)
		 : sched_setaffinity(p->child, size, set) ? errno
							  : 0;
	CPU_FREE(set);
	errno = rc;
	return rc ? -1 : 0;
}

static void pingpong_teardown(struct worker *w)
{
	struct pingpong *p = w->data;
	if (p->child > 0)
		probe_partner_let_go(w, p->child);
	if (p->child > 0 || p->thread) {
		if (p->futex) {
			__atomic_store_n(p->turn, STOP, __ATOMIC_RELEASE);
			futex(p->turn, p->wake_op, 1);
		} else {
			close(p->to[1]); /* the partner reads end of file */
			p->to[1] = -1;
		}
		if (w->env->threaded)
			pthread_join(p->thread, NULL);
		else
			while (waitpid(p->child, NULL, 0) < 0 && errno == EINTR)
				;
	}
	for (int i = 0; i < 2; i++) {
		if (p->to[i] >= 0)
			close(p->to[i]);
		if (p->from[i] >= 0)
			close(p->from[i]);
	}
	if (p->turn)
		munmap((void *)p->turn, sizeof *p->turn);
	free(p);
}

static int pingpong_setup(struct worker *w)
{
	struct pingpong *p = calloc(1, sizeof *p);
	if (!p)
		return -1;
	p->to[0] = p->to[1] = p->from[0] = p->from[1] = -1;
	w->data = p;
	p->futex = probe_variant_is(w->env, "futex");
	if (p->futex) {
		void *m = mmap(NULL, sizeof *p->turn, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			goto fail;
		p->turn = m;
		int private = w->env->threaded ? FUTEX_PRIVATE_FLAG : 0;
		p->wait_op = FUTEX_WAIT | private;
		p->wake_op = FUTEX_WAKE | private;
	} else if (pipe2(p->to, O_CLOEXEC) != 0 || pipe2(p->from, O_CLOEXEC) != 0) {
		goto fail;
	}
	if (w->env->threaded) {
		int rc = pthread_create(&p->thread, NULL, partner_thread, p);
		if (rc) {
			p->thread = 0;
			errno = rc;
			goto fail;
		}
	} else {
		pid_t parent = getpid();
		p->child = fork();
		if (p->child < 0)
			goto fail;
		if (p->child == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() == parent) {
				if (!p->futex) /* or the worker's close is no end of file */
					close(p->to[1]);
				partner(p);
			}
			_exit(0);
		}
		probe_partner_watch(w, p->child);
		if (!p->futex) { /* a dead partner is then end of file, not a hang */
			close(p->to[0]);
			close(p->from[1]);
			p->to[0] = p->from[1] = -1;
		}
	}
	if (w->env->probe->needs_partner_cpu && pin_partner(p, w->env->threaded, w->partner_cpu) != 0)
		goto fail;
	return 0;
fail:;
	int e = errno;
	pingpong_teardown(w);
	errno = e;
	return -1;
}

static inline int pingpong_op(struct worker *w)
{
	const struct pingpong *p = w->data;
	if (!p->futex) {
		char c = 0;
		if (write(p->to[1], &c, 1) != 1)
			return -1;
		ssize_t n = read(p->from[0], &c, 1);
		if (n != 1)
			errno = n ? errno : EPIPE;
		return n == 1 ? 0 : -1;
	}
	__atomic_store_n(p->turn, PARTNER_TURN, __ATOMIC_RELEASE);
	if (futex(p->turn, p->wake_op, 1) < 0)
		return -1;
	while (__atomic_load_n(p->turn, __ATOMIC_ACQUIRE) == PARTNER_TURN)
		if (futex(p->turn, p->wait_op, PARTNER_TURN) != 0 && errno != EAGAIN && errno != EINTR)
			return -1;
	return 0;
}
PROBE_LOOP(pingpong_op)

#define PINGPONG_COMMON                                                                                      \
	.subsystem = "sched/wakeup",                                                                         \
	.variants = {{"pipe", "one byte over a pipe each way: write, read", "write,read"},                   \
		     {"futex", "FUTEX_WAKE, then FUTEX_WAIT unless the partner already answered", "futex"}}, \
	.syscalls = "write,read,futex", .processes_per_worker = 1, .partner = 1, .setup = pingpong_setup,    \
	.teardown = pingpong_teardown, PROBE_OPS(pingpong_op)

OSLENS_PROBE(pingpong) = {
	.name = "pingpong",
	.summary = "round trip between a worker and a partner on the same CPU (pipe or futex)",
	PINGPONG_COMMON,
};

OSLENS_PROBE(pingpong_other) = {
	.name = "pingpong-other",
	.summary = "round trip between a worker and a partner pinned to another CPU (pipe or futex)",
	.needs_partner_cpu = 1,
	PINGPONG_COMMON,
};

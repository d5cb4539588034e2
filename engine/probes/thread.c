/* pthread_create() of a thread that returns at once, then pthread_join():
 * the cost of starting and ending a task that shares the address space.
 * glibc adds its own calls around clone3: signal masking, the new thread's
 * robust list and rseq registration, and on exit the madvise() that frees
 * the cached stack's pages; join sleeps on the exit futex if it must. */
#include <errno.h>
#include <pthread.h>

#include "../probe.h"

static void *thread_body(void *arg)
{
	return arg;
}

static inline int thread_op(struct worker *w)
{
	(void)w;
	pthread_t t;
	int rc = pthread_create(&t, NULL, thread_body, NULL);
	if (rc == 0)
		rc = pthread_join(t, NULL);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}
PROBE_LOOP(thread_op)

OSLENS_PROBE(thread) = {
	.name = "thread",
	.summary = "pthread_create() of a thread that returns at once, then pthread_join()",
	.subsystem = "process/sched",
	.syscalls = "rt_sigprocmask,clone3,rt_sigprocmask,rseq,set_robust_list,rt_sigprocmask,"
		    "rt_sigprocmask,madvise,exit,futex",
	.variants = {{"default", "default attributes: glibc reuses the cached stack"}},
	.processes_per_worker = 1,
	PROBE_OPS(thread_op),
};

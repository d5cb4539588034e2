/* OSMark sembench: a worker and a partner of its own ping-pong on a private
 * pair of SysV semaphores; one operation is one round trip. The partner is a
 * child process (process mode) or a thread (thread mode) and inherits the
 * worker's CPU, so every round trip is two context switches on that CPU. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../probe.h"

enum { PING, PONG };

struct sem_worker {
	int id;
	pid_t child;
	pthread_t thread;
	volatile int *done; /* shared with a child partner */
};

static int sem_change(int id, unsigned short num, short delta)
{
	struct sembuf b = {.sem_num = num, .sem_op = delta, .sem_flg = 0};
	while (semop(id, &b, 1) != 0)
		if (errno != EINTR)
			return -1;
	return 0;
}

static void partner(const struct sem_worker *s)
{
	while (sem_change(s->id, PING, -1) == 0 && !*s->done)
		if (sem_change(s->id, PONG, 1) != 0)
			break;
}

static void *partner_thread(void *arg)
{
	partner(arg);
	return NULL;
}

static int sem_global_setup(struct probe_env *env)
{
	int *ids = calloc(env->nworkers, sizeof *ids);
	if (!ids)
		return -1;
	for (int i = 0; i < env->nworkers; i++)
		if ((ids[i] = probe_sem_create(env, 2)) < 0)
			return -1;
	env->data = ids;
	return 0;
}

static void sem_global_teardown(struct probe_env *env)
{
	free(env->data);
}

static int sem_setup(struct worker *w)
{
	struct sem_worker *s = calloc(1, sizeof *s);
	if (!s)
		return -1;
	s->id = ((int *)w->env->data)[w->index];
	s->done = mmap(NULL, sizeof *s->done, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (s->done == MAP_FAILED)
		return -1;
	w->data = s;
	if (w->env->threaded) {
		int rc = pthread_create(&s->thread, NULL, partner_thread, s);
		if (rc) {
			errno = rc;
			return -1;
		}
		return 0;
	}
	pid_t parent = getpid();
	s->child = fork();
	if (s->child < 0)
		return -1;
	if (s->child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == parent)
			partner(s);
		_exit(0);
	}
	probe_partner_watch(w, s->child);
	return 0;
}

static void sem_teardown(struct worker *w)
{
	struct sem_worker *s = w->data;
	if (s->child > 0)
		probe_partner_let_go(w, s->child);
	*s->done = 1;
	sem_change(s->id, PING, 1);
	if (w->env->threaded) {
		pthread_join(s->thread, NULL);
	} else {
		int status;
		while (waitpid(s->child, &status, 0) < 0 && errno == EINTR)
			;
	}
	munmap((void *)s->done, sizeof *s->done);
	free(s);
}

static inline int sem_op(struct worker *w)
{
	const struct sem_worker *s = w->data;
	if (sem_change(s->id, PING, 1) != 0)
		return -1;
	return sem_change(s->id, PONG, -1);
}
PROBE_LOOP(sem_op)

OSLENS_PROBE(sem) = {
	.name = "sem",
	.summary = "SysV semaphore ping-pong between a worker and its partner (OSMark sembench)",
	.subsystem = "ipc/sem",
	.syscalls = "semtimedop,semtimedop", /* glibc's semop() on x86-64; post and wait */
	.variants = {{"default", "a private semaphore pair per worker; partner on the same CPU"}},
	.processes_per_worker = 1,
	.partner = 1,
	.global_setup = sem_global_setup,
	.global_teardown = sem_global_teardown,
	.setup = sem_setup,
	.teardown = sem_teardown,
	PROBE_OPS(sem_op),
};

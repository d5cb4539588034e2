/* SysV semop() without blocking: increment then decrement a private
 * semaphore, as two calls of one sembuf each. A single-sembuf semop takes
 * the kernel's fast path (the per-semaphore lock); two sembufs in one call
 * would take the whole-set lock of the "complex" path instead. glibc
 * issues semop() as semtimedop() with no timeout: the same kernel path. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/sem.h>

#include "../probe.h"

static int semop_global_setup(struct probe_env *env)
{
	int *ids = calloc(env->nworkers, sizeof *ids);
	if (!ids)
		return -1;
	env->data = ids;
	for (int i = 0; i < env->nworkers; i++)
		if ((ids[i] = probe_sem_create(env, 1)) < 0)
			return -1;
	return 0;
}

static void semop_global_teardown(struct probe_env *env)
{
	free(env->data);
}

static int semop_setup(struct worker *w)
{
	w->data = (void *)(intptr_t)((int *)w->env->data)[w->index];
	return 0;
}

static inline int semop_op(struct worker *w)
{
	int id = (int)(intptr_t)w->data;
	struct sembuf up = {.sem_num = 0, .sem_op = 1, .sem_flg = IPC_NOWAIT};
	struct sembuf down = {.sem_num = 0, .sem_op = -1, .sem_flg = IPC_NOWAIT};
	if (semop(id, &up, 1) != 0)
		return -1;
	return semop(id, &down, 1);
}
PROBE_LOOP(semop_op)

OSLENS_PROBE(semop) = {
	.name = "semop",
	.summary = "semop() +1 then semop() -1 on a private SysV semaphore, never blocking",
	.subsystem = "ipc/sem",
	.syscalls = "semtimedop,semtimedop",
	.variants = {{"default", "a one-semaphore set per worker; two semop() calls per operation"}},
	.global_setup = semop_global_setup,
	.global_teardown = semop_global_teardown,
	.setup = semop_setup,
	PROBE_OPS(semop_op),
};

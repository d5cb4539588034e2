/* worker.c: a worker of `run`, as its master starts it. Everything here
 * goes into the worker image too (worker_image.c), so it takes the run's
 * configuration and shared memory, never the master's own state. */
#ifndef OSLENS_WORKER_H
#define OSLENS_WORKER_H

#include "run_shm.h"

#include <sys/types.h>

/* Every task the master forks: in the workers' group, dies with the master,
 * and leaves Ctrl-C to the master; a worker that is not exec'd afresh then
 * sheds what it inherited and does not use (worker_main). */
void worker_child_init(pid_t master, pid_t pgid);
/* One worker from set-up to teardown: pin, set up, wait at the barrier,
 * run the timed loop, save results; its state and counters in its slot. */
void worker_main(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs, int idx);
/* Replaces a just-forked worker process with a fresh image (`worker` in
 * engine.h) that rebuilds cfg from cfg->argv, on the CPUs of topo (those the
 * master was given), maps the shared memory again from shm_fd, and runs
 * worker idx with its results in tmpdir; keeps its pid, group and signals.
 * If that fails, says why in the worker's slot (in shm) and exits. */
void worker_exec_fresh(const struct run_config *cfg, const struct topology *topo, struct shm *shm, int shm_fd,
		       const char *tmpdir, int idx) __attribute__((noreturn));
/* Thread mode: one process hosting every worker as a thread; never returns. */
void worker_host_threads(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs)
	__attribute__((noreturn));
/* Whether workers leave result records (histograms, a probe's own books). */
int run_has_results(const struct run_config *cfg);
/* Where worker idx leaves its results of repetition rep. */
void run_result_path(char *buf, size_t len, const char *tmpdir, int rep, int idx);

#endif

/* Inside `oslens-engine run`: what the master (run.c), the workers
 * (worker.c) and the record writer (run_emit.c) share.
 *
 * Workers talk to the master through one shared anonymous mapping: a
 * control block and one slot per worker, the hot op counter of each slot
 * alone on its cache lines. Only the master prints. */
#ifndef OSLENS_RUN_H
#define OSLENS_RUN_H

#include "engine.h"

#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define LINE 128 /* two cache lines: the adjacent-line prefetcher pairs them */

enum wstate { W_INIT, W_READY, W_RUNNING, W_DONE, W_FAILED };

struct slot {
	volatile uint64_t ops __attribute__((aligned(LINE)));
	struct {
		volatile int state;
		int pid, tid, cpu_start, cpu_end;
		int image_maps, image_anon_kb; /* the worker process's address space when it was ready; -1: unknown */
		int fresh_image;	       /* the worker process is a fresh exec (probe->fresh_image) */
		char program[32];	       /* of that exec: the worker image, or the engine itself */
		int planned_cpu;	       /* where the master planned it: a fresh image checks its own plan */
		uint64_t t_release, t_start, t_end, done_ops;
		struct rusage ru0, ru1;
		char msg[200];
		int partners[PROBE_PARTNERS_MAX]; /* pids watched by the master (partners.c) */
	} c __attribute__((aligned(LINE)));
};

struct control {
	volatile int go __attribute__((aligned(LINE)));
	volatile int stop;
	int rep;
	uint64_t t_go, warm_deadline;
	struct clock_state clock; /* the master's: the clock every worker reads */
	volatile int ready __attribute__((aligned(LINE)));
};

struct shm {
	struct control ctl;
	struct slot slot[];
};

struct master {
	const struct run_config *cfg;
	const struct topology *topo; /* the CPUs the run may use, before the master pinned itself */
	const char *tmpdir;	     /* private to this run: probes' files, workers' results */
	int apart;		     /* the master runs on no worker's CPU */
	struct shm *shm;
	size_t shm_len;
	int shm_fd;		/* a memfd: a worker exec'd afresh maps it again */
	int fresh_image;	/* this repetition's worker processes are exec'd afresh */
	struct probe_env *envs; /* one per choice */
	pid_t pids[4096];
	int npids;
	pid_t pgid;
	uint64_t deadline;
	char failure[300];
	int failed_worker;
	int late_samples; /* samples taken over half an interval late */
	struct partner_watch *partners;
	double window_s; /* the measured window as sampled */
};

static inline long futex(volatile int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

/* A probe's environment as the master gives it before its global set-up;
 * a worker exec'd afresh builds the same one from the same arguments
 * (worker.c). */
void probe_env_init(struct probe_env *env, const struct run_config *cfg, const struct choice *c, const char *tmpdir);

/* ---- partners.c: the master watches the workers' partner processes */

struct partner_watch;
struct partner_watch *partners_new(int nworkers);
void partners_free(struct partner_watch *pw);
/* Forgets the pids of a repetition whose workers are gone. */
void partners_reset(struct partner_watch *pw);
/* Why a worker cannot go on (its partner died: the worker is killed, as
 * it would wait for ever), with *worker set; NULL if none. */
const char *partners_check(struct partner_watch *pw, struct shm *shm, int *worker);

/* ---- worker.c: the worker side */

/* Every task the master forks: in the workers' group, dies with the master,
 * and leaves Ctrl-C to the master; a worker that is not exec'd afresh then
 * sheds what it inherited and does not use (worker_main). */
void worker_child_init(pid_t master, pid_t pgid);
/* One worker from set-up to teardown: pin, set up, wait at the barrier,
 * run the timed loop, save results; its state and counters in its slot. */
void worker_main(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs, int idx);
/* Replaces a just-forked worker process with a fresh image of the engine
 * (`worker` below), keeping its pid, group and signals; if that fails,
 * says why in the worker's slot and exits. */
void worker_exec_fresh(const struct master *m, int idx) __attribute__((noreturn));
/* Thread mode: one process hosting every worker as a thread; never returns. */
void worker_host_threads(struct shm *shm, const struct run_config *cfg, const struct probe_env *envs)
	__attribute__((noreturn));
/* Whether workers leave result records (histograms, a probe's own books). */
int run_has_results(const struct run_config *cfg);
/* Where worker idx leaves its results of repetition rep. */
void run_result_path(char *buf, size_t len, const char *tmpdir, int rep, int idx);

/* ---- run_emit.c: the records of a run (engine/README.md) */

void emit_header(const struct master *m, const struct topology *topo);
void emit_resources(const struct master *m, int rep);
void emit_started(const struct master *m, int rep);
/* The fields every `worker` record starts with, and its rusage object. */
void emit_worker_common(struct json *j, const struct master *m, int rep, int i);
void emit_rusage(struct json *j, const struct slot *s);
/* Copies the workers' result files to stdout, in worker order; NULL or why not. */
const char *emit_results(const struct master *m, int rep);
void emit_error(const char *msg, int worker);

#endif

/* run_emit.c: the records of `run` (engine/README.md) that describe the run
 * itself and its workers, written by the master only. Each takes what it
 * writes about, not the master. */
#ifndef OSLENS_RUN_EMIT_H
#define OSLENS_RUN_EMIT_H

#include "json.h"
#include "run_shm.h"

/* tmpdir: the run's own; master_apart: the master runs on no worker's CPU. */
void emit_header(const struct run_config *cfg, const struct topology *topo, const char *tmpdir, int master_apart);
/* What to remove if the engine is killed: the tmpdir and the SysV sets of
 * the nenvs probes' environments. */
void emit_resources(int rep, const char *tmpdir, const struct probe_env *envs, int nenvs);
void emit_started(const struct run_config *cfg, const struct shm *shm, int rep);
/* The fields every `worker` record starts with (s: worker i's slot), and
 * its rusage object. */
void emit_worker_common(struct json *j, const struct run_config *cfg, const struct slot *s, int rep, int i);
void emit_rusage(struct json *j, const struct slot *s);
/* Copies the nworkers workers' result files of repetition rep from tmpdir
 * to stdout, in worker order; NULL or why not. */
const char *emit_results(const char *tmpdir, int nworkers, int rep);
void emit_error(const char *msg, int worker);

#endif

/* The records of `oslens-engine run` (engine/README.md), written by the
 * master only: header, resources, started, worker, cpustat, the workers'
 * result files copied in order, error. */
#include "run_emit.h"
#include "run_parts.h"
#include "worker.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void emit_rusage(struct json *j, const struct slot *s)
{
	const struct rusage *a = &s->c.ru0, *b = &s->c.ru1;
	json_obj(j, "rusage");
	json_num(j, "user_s",
		 (double)(b->ru_utime.tv_sec - a->ru_utime.tv_sec) +
			 (double)(b->ru_utime.tv_usec - a->ru_utime.tv_usec) / 1e6);
	json_num(j, "sys_s",
		 (double)(b->ru_stime.tv_sec - a->ru_stime.tv_sec) +
			 (double)(b->ru_stime.tv_usec - a->ru_stime.tv_usec) / 1e6);
	json_int(j, "nvcsw", b->ru_nvcsw - a->ru_nvcsw);
	json_int(j, "nivcsw", b->ru_nivcsw - a->ru_nivcsw);
	json_int(j, "minflt", b->ru_minflt - a->ru_minflt);
	json_int(j, "majflt", b->ru_majflt - a->ru_majflt);
	/* What the figures above cover: the timed loop, warm-up excluded. */
	json_num(j, "interval_s", (double)(s->c.t_end - s->c.t_start) / 1e9);
	json_end(j);
}

void emit_worker_common(struct json *j, const struct run_config *cfg, const struct slot *s, int rep, int i)
{
	json_int(j, "rep", rep);
	json_int(j, "worker", i);
	json_int(j, "cpu", cfg->cpus[i].cpu);
	json_int(j, "cpu_seen", s->c.cpu_end);
	json_int(j, "pid", s->c.pid);
	json_int(j, "tid", s->c.tid);
	/* what a probe that copies or tears down the address space (fork) pays for */
	json_obj(j, "image");
	json_bool(j, "fresh", s->c.fresh_image); /* exec'd afresh, not a copy of the master */
	if (s->c.fresh_image)
		json_str(j, "program", s->c.program);
	if (s->c.image_maps >= 0)
		json_int(j, "mappings", s->c.image_maps);
	else
		json_null(j, "mappings");
	if (s->c.image_anon_kb >= 0)
		json_int(j, "anon_kb", s->c.image_anon_kb);
	else
		json_null(j, "anon_kb");
	json_end(j);
}

void emit_error(const char *msg, int worker)
{
	struct json *j = json_record("error");
	json_str(j, "message", msg);
	if (worker >= 0)
		json_int(j, "worker", worker);
	json_emit(j);
	fprintf(stderr, "oslens-engine: %s\n", msg);
}

const char *emit_results(const char *tmpdir, int nworkers, int rep)
{
	static char why[300];
	for (int i = 0; i < nworkers; i++) {
		char path[4200], buf[65536];
		run_result_path(path, sizeof path, tmpdir, rep, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			snprintf(why, sizeof why, "worker %d left no results: %s", i, strerror(errno));
			return why;
		}
		ssize_t n;
		while ((n = read(fd, buf, sizeof buf)) > 0)
			if (json_write(buf, (size_t)n) != 0)
				json_output_lost = 1;
		close(fd);
		unlink(path);
	}
	return NULL;
}

void emit_resources(int rep, const char *tmpdir, const struct probe_env *envs, int nenvs)
{
	struct json *j = json_record("resources");
	json_int(j, "rep", rep);
	json_str(j, "tmpdir", tmpdir);
	json_arr(j, "sysv_sem");
	for (int k = 0; k < nenvs; k++)
		for (int i = 0; i < envs[k].nsems; i++)
			json_int(j, NULL, envs[k].sem_ids[i]);
	json_end(j);
	json_emit(j);
}

void emit_started(const struct run_config *cfg, const struct shm *shm, int rep)
{
	struct json *j = json_record("started");
	json_int(j, "rep", rep);
	json_arr(j, "workers");
	for (int i = 0; i < cfg->nworkers; i++) {
		const struct slot *s = &shm->slot[i];
		json_obj(j, NULL);
		json_int(j, "worker", i);
		json_int(j, "cpu", cfg->cpus[i].cpu);
		json_int(j, "pid", s->c.pid);
		json_int(j, "tid", s->c.tid);
		json_end(j);
	}
	json_end(j);
	json_emit(j);
}

void emit_header(const struct run_config *cfg, const struct topology *topo, const char *tmpdir, int master_apart)
{
	const struct choice *c = &cfg->choices[0];
	const struct probe *p = c->probe;
	struct json *j = json_record("header");
	json_obj(j, "engine");
	json_str(j, "version", ENGINE_VERSION);
	json_str(j, "compiler", __VERSION__);
#ifdef OSLENS_STATIC
	json_bool(j, "static", 1);
#else
	json_bool(j, "static", 0);
#endif
	json_end(j);
	json_arr(j, "argv");
	for (int i = 0; i < cfg->argc; i++)
		json_str(j, NULL, cfg->argv[i]);
	json_end(j);
	json_obj(j, "probe");
	json_str(j, "name", cfg->mix ? "mix" : p->name);
	json_str(j, "subsystem", cfg->mix ? "mixed" : p->subsystem);
	json_str(j, "syscalls", cfg->mix ? "" : p->syscalls);
	json_bool(j, "partner", !cfg->mix && p->partner);
	json_end(j);
	json_str(j, "variant", cfg->mix ? "default" : p->variants[c->variant].name);
	json_obj(j, "options");
	for (int i = 0; i < PROBE_MAX_OPTS && p->opts[i].name && !cfg->mix; i++)
		json_int(j, p->opts[i].name, c->opt[i]);
	json_end(j);
	json_arr(j, "mix");
	for (int k = 0; k < cfg->nchoices && cfg->mix; k++) {
		json_obj(j, NULL);
		json_str(j, "probe", cfg->choices[k].probe->name);
		json_str(j, "variant", cfg->choices[k].probe->variants[cfg->choices[k].variant].name);
		json_end(j);
	}
	json_end(j);
	json_str(j, "mode", cfg->threaded ? "thread" : "process");
	json_int(j, "workers", cfg->nworkers);
	json_obj(j, "placement");
	json_str(j, "policy", cfg->placement);
	json_int(j, "cpus_available", topo->n);
	json_int(j, "packages", topo->npackages);
	json_arr(j, "workers");
	for (int i = 0; i < cfg->nworkers; i++) {
		topology_emit_cpu(j, &cfg->cpus[i]);
	}
	json_end(j);
	json_end(j);
	json_obj(j, "clock");
	json_str(j, "source", clock_info.source);
	json_num(j, "tsc_hz", clock_info.tsc_hz);
	json_num(j, "calibration_ppm", clock_info.calib_ppm);
	json_str(j, "reason", clock_info.reason);
	json_end(j);
	json_str(j, "fixed", cfg->ops ? "ops" : "time");
	json_bool(j, "latency", cfg->latency);
	if (cfg->latency) {
		if (cfg->latency_every)
			json_uint(j, "latency_every", cfg->latency_every);
		else
			json_str(j, "latency_every", "auto");
	}
	int light = run_part_wanted(cfg, "explain-light");
	json_bool(j, "explain", light || run_part_wanted(cfg, "explain"));
	if (light || run_part_wanted(cfg, "explain"))
		json_str(j, "explain_mode", light ? "light" : "full");
	if (cfg->ops)
		json_uint(j, "ops", cfg->ops);
	else
		json_num(j, "duration_s", cfg->duration_s);
	json_num(j, "warmup_s", cfg->warmup_s);
	json_num(j, "interval_s", cfg->interval_s);
	json_int(j, "reps", cfg->reps);
	json_str(j, "tmpdir", tmpdir);
	json_int(j, "pid", getpid());
	json_bool(j, "master_apart", master_apart);
	json_arr(j, "partner_cpus"); /* where two-task probes put each worker's partner */
	for (int i = 0; i < cfg->nworkers; i++)
		json_int(j, NULL, cfg->partner_cpus[i]);
	json_end(j);
	json_emit(j);
}

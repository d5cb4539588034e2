/* /proc/stat for `run`'s cpustat record: see cpustat.h. */
#include "cpustat.h"
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cpustat_window_init(struct cpustat_window *w, const struct run_config *cfg)
{
	long ncpus = sysconf(_SC_NPROCESSORS_CONF);
	memset(w, 0, sizeof *w);
	w->n = cfg->target ? (int)(ncpus > 0 ? ncpus : 1) : cfg->nworkers;
	w->at[0] = calloc(w->n, sizeof *w->at[0]);
	w->at[1] = calloc(w->n, sizeof *w->at[1]);
	if (w->at[0] && w->at[1])
		return 0;
	cpustat_window_free(w);
	return -1;
}

void cpustat_window_free(struct cpustat_window *w)
{
	free(w->at[0]);
	free(w->at[1]);
	w->at[0] = w->at[1] = NULL;
}

void cpustat_take(struct cpustat_window *w, const struct run_config *cfg, int end)
{
	struct cpustat *out = w->at[end];
	w->mono[end] = mono_ns();
	memset(out, 0, sizeof *out * w->n);
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return;
	char line[512];
	while (fgets(line, sizeof line, f)) {
		int cpu;
		struct cpustat s = {.seen = 1};
		if (sscanf(line, "cpu%d %lu %lu %lu %lu %lu %lu %lu %lu", &cpu, &s.v[0], &s.v[1], &s.v[2], &s.v[3],
			   &s.v[4], &s.v[5], &s.v[6], &s.v[7]) != 9)
			continue;
		if (cfg->target) {
			if (cpu >= 0 && cpu < w->n)
				out[cpu] = s;
			continue;
		}
		for (int i = 0; i < cfg->nworkers; i++)
			if (cfg->cpus[i].cpu == cpu)
				out[i] = s;
	}
	fclose(f);
}

void cpustat_emit(const struct cpustat_window *w, const struct run_config *cfg, int rep)
{
	static const char *names[8] = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"};
	const struct cpustat *a = w->at[0], *b = w->at[1];
	double ns_per_tick = 1e9 / (double)sysconf(_SC_CLK_TCK);
	struct json *j = json_record("cpustat");
	json_int(j, "rep", rep);
	json_num(j, "resolution_ns", ns_per_tick);
	json_uint(j, "start_ns", w->mono[0]); /* CLOCK_MONOTONIC, as the detour probe's start_ns */
	json_uint(j, "end_ns", w->mono[1]);
	/* an I/O's cost lands on any CPU (a device's interrupt, a driver's
	 * threads): then every CPU, not just the workers' */
	json_bool(j, "all_cpus", cfg->target != NULL);
	json_arr(j, "cpus");
	for (int i = 0; i < w->n; i++) {
		if (cfg->target && !(a[i].seen && b[i].seen))
			continue; /* not online at both reads */
		json_obj(j, NULL);
		json_int(j, "cpu", cfg->target ? i : cfg->cpus[i].cpu);
		for (int k = 0; k < 8; k++)
			json_num(j, names[k], (double)(b[i].v[k] - a[i].v[k]) * ns_per_tick);
		json_end(j);
	}
	json_end(j);
	json_emit(j);
}

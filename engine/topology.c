#include "topology.h"
#include "args.h"
#include "json.h"

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cpulist_parse(const char *s, int *out, int max)
{
	int n = 0;
	while (*s && *s != '\n') {
		char *end;
		long a = strtol(s, &end, 10), b = a;
		if (end == s || a < 0)
			return -1;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			if (end == s + 1 || b < a)
				return -1;
			s = end;
		}
		for (long c = a; c <= b; c++) {
			if (n >= max)
				return -1;
			out[n++] = (int)c;
		}
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -1;
	}
	return n;
}

/* OSLENS_SYSFS points the engine at a copy of /sys, so that placement can
 * be tested on topologies (sockets, SMT) the test machine does not have. */
static int model_machine(void)
{
	const char *r = getenv("OSLENS_SYSFS");
	return r && *r;
}

static const char *sysfs_root(void)
{
	return model_machine() ? getenv("OSLENS_SYSFS") : "/sys";
}

static FILE *sys_open(const char *fmt, int cpu)
{
	char rel[128], path[512];
	snprintf(rel, sizeof rel, fmt, cpu);
	snprintf(path, sizeof path, "%s/%s", sysfs_root(), rel);
	return fopen(path, "r");
}

static int read_int(const char *fmt, int cpu, int def)
{
	char buf[64];
	FILE *f = sys_open(fmt, cpu);
	if (!f)
		return def;
	int v = def;
	if (fgets(buf, sizeof buf, f))
		v = atoi(buf);
	fclose(f);
	return v;
}

static int read_list(const char *fmt, int cpu, int *out, int max)
{
	char buf[4096];
	FILE *f = sys_open(fmt, cpu);
	if (!f)
		return -1;
	int n = -1;
	if (fgets(buf, sizeof buf, f))
		n = cpulist_parse(buf, out, max);
	fclose(f);
	return n;
}

static int cpu_node(int cpu)
{
	char path[512];
	snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", sysfs_root(), cpu);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int node = -1;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "node", 4) && e->d_name[4] >= '0' && e->d_name[4] <= '9') {
			node = atoi(e->d_name + 4);
			break;
		}
	closedir(d);
	return node;
}

static int is_online(const int *online, int n, int cpu)
{
	for (int i = 0; i < n; i++)
		if (online[i] == cpu)
			return 1;
	return 0;
}

int topology_read(struct topology *t)
{
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	int max = nconf > 0 ? (int)nconf : 1;
	if (max < 4096)
		max = 4096;
	int *online = calloc(max, sizeof *online), *sib = calloc(max, sizeof *sib);
	cpu_set_t *mask = CPU_ALLOC(max);
	size_t msize = CPU_ALLOC_SIZE(max);
	t->cpus = calloc(max, sizeof *t->cpus);
	if (!online || !sib || !mask || !t->cpus)
		return -1;

	FILE *f = sys_open("devices/system/cpu/online", 0);
	char buf[4096];
	int nonline = -1;
	if (f) {
		if (fgets(buf, sizeof buf, f))
			nonline = cpulist_parse(buf, online, max);
		fclose(f);
	}
	if (nonline <= 0 && model_machine())
		/* A model is the caller's to give: without its CPU list, falling
		 * back as for a host without sysfs made a 4096-CPU machine of it. */
		die_usage("OSLENS_SYSFS=%s: no readable CPU list at devices/system/cpu/online there", sysfs_root());
	if (nonline <= 0) { /* no sysfs: trust the affinity mask alone */
		nonline = 0;
		for (int c = 0; c < max; c++)
			online[nonline++] = c;
	}
	CPU_ZERO_S(msize, mask);
	if (model_machine()) {
		for (int i = 0; i < nonline; i++) /* a model machine: all its CPUs */
			CPU_SET_S(online[i], msize, mask);
	} else if (sched_getaffinity(0, msize, mask) != 0) {
		return -1;
	}

	t->n = 0;
	t->nonline = 0;
	t->npackages = 0;
	for (int i = 0; i < nonline; i++) {
		int c = online[i];
		if (!CPU_ISSET_S(c, msize, mask))
			continue;
		struct cpu_topo *ct = &t->cpus[t->n++];
		ct->cpu = c;
		ct->package = read_int("devices/system/cpu/cpu%d/topology/physical_package_id", c, 0);
		ct->die = read_int("devices/system/cpu/cpu%d/topology/die_id", c, 0);
		ct->core = read_int("devices/system/cpu/cpu%d/topology/core_id", c, c);
		ct->node = cpu_node(c);
		ct->smt = 0;
		/* Rank among the siblings we may use: under a cpuset holding only
		 * second hyperthreads, each is the first of its core for us. */
		int ns = read_list("devices/system/cpu/cpu%d/topology/thread_siblings_list", c, sib, max);
		for (int k = 0; k < ns; k++)
			if (sib[k] < c && CPU_ISSET_S(sib[k], msize, mask) && is_online(online, nonline, sib[k]))
				ct->smt++;
	}
	t->nonline = nonline;
	/* Packages are counted by distinct id, as ids need not be dense. */
	for (int i = 0; i < t->n; i++) {
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = t->cpus[j].package == t->cpus[i].package;
		t->npackages += !seen;
	}
	free(online);
	free(sib);
	CPU_FREE(mask);
	/* Room for every possible CPU was only needed while reading: a worker
	 * inherits the master's heap, and fork's cost grows with it. */
	struct cpu_topo *fit = realloc(t->cpus, (t->n > 0 ? t->n : 1) * sizeof *t->cpus);
	if (fit)
		t->cpus = fit;
	return t->n > 0 ? 0 : -1;
}

const struct cpu_topo *topology_cpu(const struct topology *t, int cpu)
{
	for (int i = 0; i < t->n; i++)
		if (t->cpus[i].cpu == cpu)
			return &t->cpus[i];
	return NULL;
}

struct ranked {
	struct cpu_topo c;
	int rank; /* position within its package, for round-robin */
};

static int by_compact(const void *a, const void *b)
{
	const struct cpu_topo *x = a, *y = b;
	if (x->smt != y->smt)
		return x->smt - y->smt;
	if (x->package != y->package)
		return x->package - y->package;
	if (x->die != y->die)
		return x->die - y->die;
	if (x->node != y->node)
		return x->node - y->node;
	if (x->core != y->core)
		return x->core - y->core;
	return x->cpu - y->cpu;
}

static int by_spread(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	if (x->c.smt != y->c.smt)
		return x->c.smt - y->c.smt;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return x->c.package - y->c.package;
}

/* Both policies use every physical core before any SMT sibling, so that two
 * workers share a core only when the worker count requires it. compact then
 * fills package after package; spread deals CPUs round-robin over packages. */
int placement_plan(const struct topology *t, const char *policy, int n, struct cpu_topo *out, char *err, int errlen)
{
	if (n < 1 || n > t->n) {
		snprintf(err, errlen, "%d workers requested but %d CPUs are available to this process", n, t->n);
		return -1;
	}
	struct cpu_topo *all = malloc(t->n * sizeof *all);
	struct ranked *r = malloc(t->n * sizeof *r);
	if (!all || !r) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(all, t->cpus, t->n * sizeof *all);
	qsort(all, t->n, sizeof *all, by_compact);
	if (!strcmp(policy, "compact")) {
		memcpy(out, all, n * sizeof *out);
	} else if (!strcmp(policy, "spread")) {
		for (int i = 0; i < t->n; i++) {
			r[i].c = all[i];
			r[i].rank = (i > 0 && all[i - 1].smt == all[i].smt && all[i - 1].package == all[i].package)
					    ? r[i - 1].rank + 1
					    : 0;
		}
		qsort(r, t->n, sizeof *r, by_spread);
		for (int i = 0; i < n; i++)
			out[i] = r[i].c;
	} else {
		snprintf(err, errlen, "unknown placement '%s' (compact, spread)", policy);
		free(all);
		free(r);
		return -1;
	}
	free(all);
	free(r);
	return 0;
}

void topology_emit_cpu(struct json *j, const struct cpu_topo *c)
{
	json_obj(j, NULL);
	json_int(j, "cpu", c->cpu);
	json_int(j, "package", c->package);
	json_int(j, "die", c->die);
	json_int(j, "core", c->core);
	if (c->node >= 0)
		json_int(j, "node", c->node);
	else
		json_null(j, "node");
	json_int(j, "smt", c->smt);
	json_end(j);
}

int topology_unused(const struct topology *t, const int *used, int nused, int *out)
{
	int n = 0;
	for (int k = 0; k < t->n; k++) {
		int in_use = 0;
		for (int i = 0; i < nused && !in_use; i++)
			in_use = used[i] == t->cpus[k].cpu;
		if (!in_use)
			out[n++] = t->cpus[k].cpu;
	}
	return n;
}

int cpus_pin(const int *cpus, int n)
{
	return cpus_pin_pid(0, cpus, n);
}

int cpus_pin_pid(pid_t pid, const int *cpus, int n)
{
	int max = 0;
	for (int i = 0; i < n; i++)
		max = cpus[i] > max ? cpus[i] : max;
	cpu_set_t *set = CPU_ALLOC(max + 1);
	if (!set)
		return -1;
	size_t size = CPU_ALLOC_SIZE(max + 1);
	CPU_ZERO_S(size, set);
	for (int i = 0; i < n; i++)
		CPU_SET_S(cpus[i], size, set);
	int rc = sched_setaffinity(pid, size, set);
	CPU_FREE(set);
	return rc;
}

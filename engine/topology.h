/* CPU topology from sysfs and the placement policies that map workers to CPUs. */
#ifndef OSLENS_TOPOLOGY_H
#define OSLENS_TOPOLOGY_H

#include <sys/types.h>

struct cpu_topo {
	int cpu;
	int package;
	int die;
	int core;
	int node; /* -1 where the kernel exposes no NUMA node */
	int smt;  /* 0 for the first hardware thread of its core, 1 for the next... */
};

struct topology {
	int n;		       /* CPUs online and in our affinity mask */
	struct cpu_topo *cpus; /* ascending cpu number */
	int nonline;	       /* CPUs online in all */
	int npackages;
};

int topology_read(struct topology *t);
const struct cpu_topo *topology_cpu(const struct topology *t, int cpu);
/* Fills out[0..n) with the CPUs for n workers; -1 and a message on error. */
int placement_plan(const struct topology *t, const char *policy, int n, struct cpu_topo *out, char *err, int errlen);
/* The CPUs of t that are not in used[0..nused), in t's order, into out
 * (room for t->n); returns their count. Where the master, a partner task or
 * a tracer can run without disturbing what is measured. */
int topology_unused(const struct topology *t, const int *used, int nused, int *out);
/* Restricts the calling thread to cpus[0..n) (n > 0); 0, or -1 and errno. */
int cpus_pin(const int *cpus, int n);
/* The same for another process (0: the caller), as a command held before exec. */
int cpus_pin_pid(pid_t pid, const int *cpus, int n);
struct json;
/* One CPU's place in the topology, as an element of a JSON array. */
void topology_emit_cpu(struct json *j, const struct cpu_topo *c);
/* Parses "0-3,8"; returns the count or -1. */
int cpulist_parse(const char *s, int *out, int max);

#endif

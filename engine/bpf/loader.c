/* See loader.h. */
#include "loader.h"
#include "kstack.h"
#include "runlen.h"
#include "../json.h"
#include "../textfile.h"

#include <errno.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static char last_warning[256];

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static int verbose = -1;
	if (verbose < 0)
		verbose = getenv("OSLENS_TRACE_DEBUG") && *getenv("OSLENS_TRACE_DEBUG");
	if (verbose)
		return vfprintf(stderr, fmt, ap);
	if (level != LIBBPF_WARN)
		return 0;
	char buf[sizeof last_warning];
	vsnprintf(buf, sizeof buf, fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	/* the verifier's log comes as many lines between "-- BEGIN/END" markers;
	 * the line that names the failing program is more telling */
	if (buf[0] && strncmp(buf, "--", 2) && !strstr(buf, "PROG LOAD LOG"))
		snprintf(last_warning, sizeof last_warning, "%s", buf);
	return 0;
}

void loader_init(void)
{
	libbpf_set_print(libbpf_print);
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
}

const char *loader_last_warning(void)
{
	return last_warning;
}

void loader_clear_warning(void)
{
	last_warning[0] = 0;
}

static int have_cap(int cap)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof d);
	if (syscall(SYS_capget, &h, d) != 0)
		return 0;
	return (d[cap / 32].effective >> (cap % 32)) & 1;
}

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

/* Kernels before 5.8 know no CAP_BPF: there CAP_SYS_ADMIN is the test. */
static int privileged(void)
{
	return have_cap(CAP_SYS_ADMIN) || (have_cap(CAP_BPF) && have_cap(CAP_PERFMON));
}

/* Which of the pair this process's effective set lacks (CapEff), by name. */
static const char *missing_caps(void)
{
	int bpf = have_cap(CAP_BPF), perfmon = have_cap(CAP_PERFMON);
	return !bpf && !perfmon ? "CAP_BPF and CAP_PERFMON" : !bpf ? "CAP_BPF" : "CAP_PERFMON";
}

void loader_eperm_reason(char *why, size_t whylen)
{
	if (privileged())
		snprintf(why, whylen,
			 "the kernel refused to load BPF programs although this process may "
			 "(Operation not permitted: lockdown or a security module?)");
	else if (geteuid() == 0)
		/* uid 0 without the capabilities: a container that does not grant
		 * them, or a dropped set; "needs root" would be no answer there. */
		snprintf(why, whylen,
			 "BPF needs CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN, and this process runs as root without %s "
			 "(a container or capability set that does not grant them: --cap-add BPF --cap-add PERFMON)",
			 missing_caps());
	else
		snprintf(why, whylen, "BPF needs root or CAP_BPF+CAP_PERFMON (uid %u, without %s)", (unsigned)geteuid(),
			 missing_caps());
}

int loader_check_usable(char *why, size_t whylen)
{
	if (!privileged()) {
		loader_eperm_reason(why, whylen);
		return -1;
	}
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(why, whylen,
			 "the kernel has no BTF (/sys/kernel/btf/vmlinux: %s; needs CONFIG_DEBUG_INFO_BTF)",
			 strerror(errno));
		return -1;
	}
	return 0;
}

char *loader_available_events(void)
{
	static const char *const paths[] = {"/sys/kernel/tracing/available_events",
					    "/sys/kernel/debug/tracing/available_events"};
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		/* "\n" first, so that every event is found as ":name\n" */
		char *buf = read_text_file(paths[i], 1);
		if (!buf)
			continue;
		buf[0] = '\n';
		if (buf[1])
			return buf;
		free(buf);
	}
	return NULL;
}

int loader_has_tracepoint(const char *events, const char *tp)
{
	if (!events)
		return 1;
	char pat[128];
	snprintf(pat, sizeof pat, ":%s\n", tp);
	return strstr(events, pat) != NULL;
}

const char *loader_tp_name(const struct bpf_program *p)
{
	const char *sec = bpf_program__section_name(p);
	const char *slash = strchr(sec, '/');
	return !strncmp(sec, "raw_tp/", 7) && slash ? slash + 1 : NULL;
}

int loader_listed(const char *list, const char *name)
{
	char pat[128], have[1024];
	snprintf(pat, sizeof pat, ",%s,", name);
	snprintf(have, sizeof have, ",%s,", list ? list : "");
	return strstr(have, pat) != NULL;
}

void loader_missing_add(struct loader_missing *m, const char *what)
{
	if (loader_listed(m->list, what))
		return;
	size_t len = strlen(m->list);
	snprintf(m->list + len, sizeof m->list - len, "%s%s", len ? "," : "", what);
}

void loader_missing_add_tp(struct loader_missing *m, const char *tp)
{
	char name[128];
	snprintf(name, sizeof name, "%s", tp);
	size_t n = strlen(name);
	if (n > 6 && !strcmp(name + n - 6, "_entry"))
		name[n - 6] = 0;
	else if (n > 5 && !strcmp(name + n - 5, "_exit"))
		name[n - 5] = 0;
	loader_missing_add(m, name);
}

static int ends_an_interval(const struct bpf_program *p)
{
	const char *sec = bpf_program__section_name(p);
	return strstr(sec, "_exit") || !strncmp(sec, "fexit/", 6) || strstr(sec, "contention_end");
}

int loader_attach_ends_first(struct bpf_object_skeleton *s, int (*skip)(const struct bpf_program *p, void *arg),
			     int (*failed)(const struct bpf_program *p, int err, void *arg), void *arg)
{
	for (int pass = 0; pass < 2; pass++)
		for (int k = 0; k < s->prog_cnt; k++) {
			struct bpf_program *p = *s->progs[k].prog;
			if (!bpf_program__autoload(p) || !strcmp(bpf_program__section_name(p), "perf_event") ||
			    (skip && skip(p, arg)) || ends_an_interval(p) != (pass == 0))
				continue;
			loader_clear_warning();
			struct bpf_link *link = bpf_program__attach(p);
			if (link)
				*s->progs[k].link = link;
			else if (failed(p, errno, arg))
				return -1;
		}
	return 0;
}

void loader_destroy_links(struct bpf_link ***links, int *nlinks)
{
	for (int i = 0; i < *nlinks; i++)
		bpf_link__destroy((*links)[i]); /* closes the perf event too */
	free(*links);
	*links = NULL;
	*nlinks = 0;
}

/* One event of attr per target (a pid with cpu -1, or a CPU with pid -1)
 * running prog, appended to *links; on failure destroys what it made. */
static int attach_events(struct bpf_program *prog, struct perf_event_attr *attr, const int *targets, int n, int tasks,
			 struct bpf_link ***links, int *nlinks)
{
	struct bpf_link **more = realloc(*links, (*nlinks + n) * sizeof *more);
	if (!more)
		return -1;
	*links = more;
	int first = *nlinks;
	for (int i = 0; i < n; i++) {
		int fd = (int)syscall(SYS_perf_event_open, attr, tasks ? targets[i] : -1, tasks ? -1 : targets[i], -1,
				      PERF_FLAG_FD_CLOEXEC);
		struct bpf_link *link = fd >= 0 ? bpf_program__attach_perf_event(prog, fd) : NULL;
		if (!link) {
			if (fd >= 0)
				close(fd);
			for (int k = first; k < *nlinks; k++)
				bpf_link__destroy((*links)[k]);
			*nlinks = first;
			return -1;
		}
		(*links)[(*nlinks)++] = link;
	}
	return 0;
}

int loader_attach_sw_events(struct bpf_program *prog, uint64_t config, const int *targets, int n, int tasks,
			    struct bpf_link ***links, int *nlinks)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof attr,
		.config = config,
		.sample_period = 1,
		.disabled = 1,
		.inherit = tasks,
	};
	return attach_events(prog, &attr, targets, n, tasks, links, nlinks);
}

int loader_attach_clocks(struct bpf_program *prog, uint64_t period_ns, const int *targets, int n, int tasks,
			 struct bpf_link ***links, int *nlinks)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof attr,
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = period_ns,
		.disabled = 1,
	};
	return attach_events(prog, &attr, targets, n, tasks, links, nlinks);
}

const char *loader_softirq_name(long vec)
{
	static const char *const names[] = {"HI",	"TIMER",   "NET_TX", "NET_RX",	"BLOCK",
					    "IRQ_POLL", "TASKLET", "SCHED",  "HRTIMER", "RCU"};
	return vec >= 0 && vec < (long)(sizeof names / sizeof names[0]) ? names[vec] : NULL;
}

/* LCB_F_* of include/trace/events/lock.h, named as perf lock contention does. */
const char *loader_lock_kind(unsigned flags)
{
	enum { SPIN = 1, READ = 2, WRITE = 4, RT = 8, PERCPU = 16, MUTEX = 32 };
	switch (flags) {
	case SPIN: return "spinlock";
	case SPIN | READ: return "rwlock:R";
	case SPIN | WRITE: return "rwlock:W";
	case READ: return "rwsem:R";
	case WRITE: return "rwsem:W";
	case RT: return "rt-mutex";
	case RT | READ: return "rwlock-rt:R";
	case RT | WRITE: return "rwlock-rt:W";
	case PERCPU | READ: return "pcpu-sem:R";
	case PERCPU | WRITE: return "pcpu-sem:W";
	case MUTEX: return "mutex";
	case MUTEX | SPIN: return "mutex-spin";
	case 0: return "semaphore";
	default: return "unknown";
	}
}

const char *loader_part_of(const struct bpf_program *p)
{
	const char *tp = loader_tp_name(p);
	if (!tp)
		return "page_faults"; /* the perf_event fault ends */
	if (!strncmp(tp, "page_fault_", 11))
		return "page_faults";
	if (!strncmp(tp, "contention_", 11))
		return "lock_contention";
	if (!strncmp(tp, "irq_handler_", 12))
		return "hardirqs";
	if (!strncmp(tp, "softirq_", 8))
		return "softirqs";
	if (!strncmp(tp, "ipi_", 4))
		return "ipis_sent";
	if (!strcmp(tp, "tlb_flush"))
		return "tlb_flushes";
	if (!strcmp(tp, "sched_wakeup") || !strcmp(tp, "sched_wakeup_new"))
		return "runqueue_wait";
	if (!strcmp(tp, "sched_migrate_task"))
		return "migrations";
	if (!strncmp(tp, "sched_", 6))
		return NULL;
	return tp; /* an x86 vector: named by its tracepoint */
}

void loader_note_missing(struct loader_missing *m, const struct bpf_program *p, const char *part)
{
	const char *tp = loader_tp_name(p);
	if (tp && part == tp)
		loader_missing_add_tp(m, tp);
	else
		loader_missing_add(m, part);
}

int loader_choose_programs(struct bpf_object *obj, loader_part_fn part_of, const char *skip, struct loader_missing *m,
			   int *fault_tps, char *why, size_t whylen)
{
	char *events = loader_available_events();
	*fault_tps = loader_has_tracepoint(events, "page_fault_user");
	struct bpf_program *p;
	int rc = 0;
	bpf_object__for_each_program(p, obj)
	{
		const char *tp = loader_tp_name(p), *part = part_of(p);
		/* a perf_event program ends a fault, or (another part's) needs
		 * no tracepoint */
		int load = *fault_tps;
		if (tp)
			load = loader_has_tracepoint(events, tp);
		else if (part && strcmp(part, "page_faults"))
			load = 1;
		if (part && skip && loader_listed(skip, part)) {
			bpf_program__set_autoload(p, 0);
			continue;
		}
		if (!load && !part) {
			snprintf(why, whylen, "this kernel has no tracepoint %s", tp);
			rc = -1;
			break;
		}
		if (!load)
			loader_note_missing(m, p, part);
		bpf_program__set_autoload(p, load);
	}
	free(events);
	loader_clear_warning();
	return rc;
}

void loader_load_failed(int err, char *why, size_t whylen)
{
	if (-err == EPERM)
		loader_eperm_reason(why, whylen);
	else
		snprintf(why, whylen, "the kernel rejected the BPF programs (%s%s%s)", strerror(-err),
			 *loader_last_warning() ? ": " : "", loader_last_warning());
}

struct attach_ctx {
	loader_part_fn part_of;
	struct loader_missing *m;
	char *why;
	size_t whylen;
};

/* An optional part that will not attach is noted as missing; a core
 * program fails the whole. */
static int attach_failed(const struct bpf_program *p, int err, void *arg)
{
	struct attach_ctx *c = arg;
	const char *part = c->part_of(p);
	if (part) {
		loader_note_missing(c->m, p, part);
		return 0;
	}
	snprintf(c->why, c->whylen, "cannot attach to %s: %s", bpf_program__section_name(p), strerror(err));
	return 1;
}

int loader_attach(struct bpf_object_skeleton *s, loader_part_fn part_of, struct loader_missing *m, char *why,
		  size_t whylen)
{
	struct attach_ctx ctx = {part_of, m, why, whylen};
	return loader_attach_ends_first(s, NULL, attach_failed, &ctx);
}

void loader_emit_ips(struct json *j, const char *name, const __u64 *ips, int depth)
{
	json_arr(j, name);
	for (int i = 0; ips && i < depth && ips[i]; i++) {
		char addr[32];
		snprintf(addr, sizeof addr, "0x%llx", (unsigned long long)ips[i]);
		json_str(j, NULL, addr);
	}
	json_end(j);
}

void loader_emit_kstack(struct json *j, const char *name, const struct bpf_map *kstacks, __u64 hash)
{
	struct kstack s;
	int found = hash && bpf_map__lookup_elem(kstacks, &hash, sizeof hash, &s, sizeof s, 0) == 0;
	loader_emit_ips(j, name, found ? s.ip : NULL, KSTACK_DEPTH);
}

void loader_emit_run_lengths(struct json *j, const struct bpf_map *runlens, const char *const *names, int n)
{
	static const unsigned long over[RUNLEN_OVER] = RUNLEN_OVER_NS;
	int ncpus = libbpf_num_possible_cpus();
	if (ncpus <= 0)
		return;
	struct runlen *per_cpu = calloc(ncpus, sizeof *per_cpu); /* 8-byte aligned: no padding */
	if (!per_cpu)
		return;
	json_obj(j, "run_lengths");
	for (__u32 k = 0; k < (__u32)n; k++) {
		if (!names[k] || bpf_map__lookup_elem(runlens, &k, sizeof k, per_cpu, ncpus * sizeof *per_cpu, 0) != 0)
			continue;
		struct runlen r = {0};
		for (int c = 0; c < ncpus; c++) {
			r.count += per_cpu[c].count;
			r.sum_ns += per_cpu[c].sum_ns;
			for (int i = 0; i < RUNLEN_OVER; i++) {
				r.over_count[i] += per_cpu[c].over_count[i];
				r.over_ns[i] += per_cpu[c].over_ns[i];
			}
			for (int b = 0; b < RUNLEN_BUCKETS; b++)
				r.hist[b] += per_cpu[c].hist[b];
		}
		json_obj(j, names[k]);
		json_uint(j, "count", r.count);
		json_uint(j, "sum_ns", r.sum_ns);
		json_arr(j, "over");
		for (int i = 0; i < RUNLEN_OVER; i++) {
			json_arr(j, NULL);
			json_uint(j, NULL, over[i]);
			json_uint(j, NULL, r.over_count[i]);
			json_uint(j, NULL, r.over_ns[i]);
			json_end(j);
		}
		json_end(j);
		json_arr(j, "log2_hist");
		for (int b = 0; b < RUNLEN_BUCKETS; b++)
			if (r.hist[b]) {
				json_arr(j, NULL);
				json_int(j, NULL, b);
				json_uint(j, NULL, r.hist[b]);
				json_end(j);
			}
		json_end(j);
		json_end(j);
	}
	json_end(j);
	free(per_cpu);
}

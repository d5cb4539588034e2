/* The profiler's loader: profile.bpf.c through the skeleton bpftool made of
 * it, and the JSON records of its aggregates (see profile.h for the maps).
 * Per-CPU values are summed here; histograms keep the engine's layout. */
#include "profile.h"
#include "locknames.h"
#include "../json.h"
#include "loader.h"
#include "../textfile.h"
#include "../topology.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "profile.skel.h"
#include "syscall_names.h"

static struct profile_bpf *skel;
static struct loader_missing missing;
static struct bpf_link **fault_links;
static int n_fault_links;
static int ncpus_possible;
static int faults_timed;
static int fault_tps_attached;
static struct bpf_link **sample_links; /* a clock per online CPU */
static int n_sample_links;
static uint64_t sample_period_ns; /* 0: not sampled */

/* ---- loading ---- */

static int fail(char *why, size_t whylen, const char *fmt, const char *arg)
{
	snprintf(why, whylen, fmt, arg);
	profile_bpf_stop();
	return -1;
}

static char skipped[256];

/* What each optional program gives; NULL for the core. */
static const char *part_of(const struct bpf_program *p)
{
	const char *tp = loader_tp_name(p);
	if (tp && !strncmp(tp, "sys_", 4))
		return "syscalls";
	if (!strcmp(bpf_program__name(p), "oslens_prof_sample"))
		return "samples";
	return loader_part_of(p);
}

/* A clock on each online CPU (the workload runs wherever it likes), its
 * ticks kept for the followed processes only; `samples` missing if the
 * kernel refuses. */
static void attach_clocks(void)
{
	sample_period_ns = 0;
	if (loader_listed(skipped, "samples"))
		return;
	char *text = read_text_file("/sys/devices/system/cpu/online", 0);
	int max = ncpus_possible > 0 ? ncpus_possible : 1, *cpus = calloc(max, sizeof *cpus);
	int n = text && cpus ? cpulist_parse(text, cpus, max) : -1;
	if (n > 0 && loader_attach_clocks(skel->progs.oslens_prof_sample, PROF_SAMPLE_PERIOD_NS, cpus, n, 0,
					  &sample_links, &n_sample_links) == 0)
		sample_period_ns = PROF_SAMPLE_PERIOD_NS;
	else
		loader_missing_add(&missing, "samples");
	free(text);
	free(cpus);
}

int profile_bpf_start(const char *skip, char *why, size_t whylen)
{
	snprintf(skipped, sizeof skipped, "%s", skip ? skip : "");
	profile_bpf_stop();
	missing.list[0] = 0;
	faults_timed = fault_tps_attached = 0;
	loader_init();
	if (loader_check_usable(why, whylen) != 0)
		return -1;
	ncpus_possible = libbpf_num_possible_cpus();
	if (ncpus_possible <= 0)
		return fail(why, whylen, "cannot count the possible CPUs%s", "");

	skel = profile_bpf__open();
	if (!skel)
		return fail(why, whylen, "cannot open the BPF object: %s", strerror(errno));
	int fault_tps, err = loader_choose_programs(skel->obj, part_of, skipped, &missing, &fault_tps, why, whylen);
	if (!err && (err = profile_bpf__load(skel)) != 0)
		loader_load_failed(err, why, whylen);
	if (err || loader_attach(skel->skeleton, part_of, &missing, why, whylen) != 0) {
		profile_bpf_stop();
		return -1;
	}
	fault_tps_attached = fault_tps;
	attach_clocks();
	return 0;
}

/* The end of a fault is perf's fault accounting: software events on the
 * workload's own threads, inherited by what they create, so that faults
 * elsewhere on the machine never run a program. */
int profile_bpf_time_faults(const pid_t *tids, int ntids)
{
	if (!skel)
		return -1;
	if (fault_tps_attached && !loader_listed(skipped, "page_faults") &&
	    loader_attach_sw_events(skel->progs.oslens_prof_fault_min, PERF_COUNT_SW_PAGE_FAULTS_MIN, tids, ntids, 1,
				    &fault_links, &n_fault_links) == 0 &&
	    loader_attach_sw_events(skel->progs.oslens_prof_fault_maj, PERF_COUNT_SW_PAGE_FAULTS_MAJ, tids, ntids, 1,
				    &fault_links, &n_fault_links) == 0) {
		faults_timed = 1;
		return 0;
	}
	loader_destroy_links(&fault_links, &n_fault_links);
	if (!loader_listed(skipped, "page_faults"))
		loader_missing_add(&missing, "page_faults");
	return -1;
}

int profile_bpf_follow(pid_t tgid)
{
	if (!skel || !skel->bss || tgid <= 0 || (unsigned)tgid / 64 >= PROF_PID_WORDS)
		return -1;
	__atomic_fetch_or(&skel->bss->followed[tgid / 64], 1ull << (tgid % 64), __ATOMIC_SEQ_CST);
	return 0;
}

int profile_bpf_followed(pid_t *out, int max)
{
	int n = 0;
	for (unsigned w = 0; skel && skel->bss && w < PROF_PID_WORDS && n < max; w++) {
		uint64_t bits = __atomic_load_n(&skel->bss->followed[w], __ATOMIC_RELAXED);
		for (int b = 0; bits && b < 64 && n < max; b++)
			if (bits >> b & 1)
				out[n++] = (pid_t)(w * 64 + b);
	}
	return n;
}

const char *profile_bpf_missing(void)
{
	return missing.list;
}

void profile_bpf_stop(void)
{
	loader_destroy_links(&fault_links, &n_fault_links);
	loader_destroy_links(&sample_links, &n_sample_links);
	if (skel) {
		profile_bpf__destroy(skel);
		skel = NULL;
	}
}

/* ---- reading the maps ---- */

/* Per-CPU map values come as one copy per possible CPU, each rounded up to 8 bytes. */
#define PERCPU_STRIDE(type) ((sizeof(type) + 7) & ~(size_t)7)
#define PERCPU_AT(buf, type, i) ((const type *)((const char *)(buf) + (size_t)(i)*PERCPU_STRIDE(type)))

static void hist_merge(struct prof_hist *to, const struct prof_hist *h)
{
	if (!h->count)
		return;
	for (int i = 0; i < PROF_HIST_BUCKETS; i++)
		to->bucket[i] += h->bucket[i];
	if (!to->count || (h->min_plus1 && h->min_plus1 < to->min_plus1))
		to->min_plus1 = h->min_plus1;
	if (h->max > to->max)
		to->max = h->max;
	to->count += h->count;
	to->sum += h->sum;
}

/* The sum of the per-CPU histograms in bucket counts wider than 32 bits. */
static void emit_hist(struct json *j, const char *key, const struct prof_hist *h)
{
	json_obj(j, key);
	json_int(j, "unit_ns", 1);
	json_int(j, "sub_bucket_bits", PROF_HIST_SUB_BITS);
	json_uint(j, "count", h->count);
	json_uint(j, "sum", h->sum);
	json_uint(j, "min", h->min_plus1 ? h->min_plus1 - 1 : 0);
	json_uint(j, "max", h->max);
	json_arr(j, "buckets");
	for (int i = 0; i < PROF_HIST_BUCKETS; i++)
		if (h->bucket[i]) {
			json_arr(j, NULL);
			json_int(j, NULL, i);
			json_uint(j, NULL, h->bucket[i]);
			json_end(j);
		}
	json_end(j);
	json_end(j);
}

static void intr_merge(struct prof_intr *to, const struct prof_intr *s)
{
	to->count += s->count;
	to->ns += s->ns;
	to->workload_count += s->workload_count;
	to->workload_ns += s->workload_ns;
}

static void emit_intr_fields(struct json *j, const struct prof_intr *s)
{
	json_uint(j, "count", s->count);
	json_uint(j, "ns", s->ns);
	json_uint(j, "workload_count", s->workload_count);
	json_uint(j, "workload_ns", s->workload_ns);
}

static const char *const vector_names[PV_MAX] = {[PV_LOCAL_TIMER] = "local_timer",
						 [PV_RESCHEDULE] = "reschedule",
						 [PV_CALL_FUNCTION] = "call_function",
						 [PV_CALL_FUNCTION_SINGLE] = "call_function_single",
						 [PV_IRQ_WORK] = "irq_work"};

static void *percpu_value(struct bpf_map *map, const void *key, size_t stride)
{
	void *buf = calloc(ncpus_possible, stride);
	if (buf && bpf_map__lookup_elem(map, key, bpf_map__key_size(map), buf, ncpus_possible * stride, 0) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static uint64_t emit_cpu_records(void)
{
	__u32 zero = 0;
	void *buf = percpu_value(skel->maps.cpus, &zero, PERCPU_STRIDE(struct prof_cpu));
	if (!buf)
		return 0;
	struct prof_cpu *all = calloc(1, sizeof *all);
	if (!all) {
		free(buf);
		return 0;
	}
	struct json *j = json_record("cpu_time");
	json_arr(j, "cpus");
	for (int i = 0; i < ncpus_possible; i++) {
		const struct prof_cpu *c = PERCPU_AT(buf, struct prof_cpu, i);
		if (c->ran_ns) {
			json_obj(j, NULL);
			json_int(j, "cpu", i);
			json_uint(j, "ns", c->ran_ns);
			json_end(j);
		}
		all->voluntary += c->voluntary;
		all->involuntary += c->involuntary;
		all->switch_ins += c->switch_ins;
		all->migrated_switch_ins += c->migrated_switch_ins;
		all->migrations += c->migrations;
		all->wakeups += c->wakeups;
		all->minor_faults += c->minor_faults;
		all->major_faults += c->major_faults;
		all->lost += c->lost;
		all->exits_lost += c->exits_lost;
		hist_merge(&all->offcpu_voluntary, &c->offcpu_voluntary);
		hist_merge(&all->offcpu_involuntary, &c->offcpu_involuntary);
		hist_merge(&all->runq, &c->runq);
		hist_merge(&all->fault, &c->fault);
		hist_merge(&all->major_fault, &c->major_fault);
		for (int v = 0; v < PROF_SOFTIRQS; v++)
			intr_merge(&all->softirq_vec[v], &c->softirq_vec[v]);
		for (int v = 0; v < PV_MAX; v++)
			intr_merge(&all->vec[v], &c->vec[v]);
	}
	json_end(j);
	json_emit(j);

	j = json_record("switches");
	json_uint(j, "voluntary", all->voluntary);
	json_uint(j, "involuntary", all->involuntary);
	json_uint(j, "migrations", all->migrations);
	json_uint(j, "migrated_switch_ins", all->migrated_switch_ins);
	json_uint(j, "switch_ins", all->switch_ins);
	json_uint(j, "wakeups", all->wakeups);
	struct prof_hist offcpu = all->offcpu_voluntary;
	hist_merge(&offcpu, &all->offcpu_involuntary);
	emit_hist(j, "offcpu", &offcpu);
	emit_hist(j, "offcpu_voluntary", &all->offcpu_voluntary);
	emit_hist(j, "offcpu_involuntary", &all->offcpu_involuntary);
	emit_hist(j, "runq", &all->runq);
	json_arr(j, "preempted_by");
	struct prof_preempt_key k, *prev = NULL;
	while (bpf_map__get_next_key(skel->maps.preempted_by, prev, &k, sizeof k) == 0) {
		__u64 n;
		if (bpf_map__lookup_elem(skel->maps.preempted_by, &k, sizeof k, &n, sizeof n, 0) == 0) {
			char comm[PROF_COMM + 1];
			memcpy(comm, k.comm, PROF_COMM);
			comm[PROF_COMM] = 0;
			json_obj(j, NULL);
			json_str(j, "comm", comm);
			json_bool(j, "kthread", k.kind == PROF_BY_KTHREAD);
			json_bool(j, "workload", k.kind == PROF_BY_WORKLOAD);
			json_uint(j, "count", n);
			json_end(j);
		}
		static struct prof_preempt_key cur;
		cur = k;
		prev = &cur;
	}
	json_end(j);
	json_emit(j);

	if (faults_timed) {
		j = json_record("faults");
		json_uint(j, "minor", all->minor_faults);
		json_uint(j, "major", all->major_faults);
		emit_hist(j, "hist", &all->fault);
		emit_hist(j, "major_hist", &all->major_fault);
		json_emit(j);
	}

	j = json_record("irqs");
	json_arr(j, "hardirq");
	__u32 irq, *prev_irq = NULL;
	static __u32 cur_irq;
	while (bpf_map__get_next_key(skel->maps.irqs, prev_irq, &irq, sizeof irq) == 0) {
		void *v = percpu_value(skel->maps.irqs, &irq, PERCPU_STRIDE(struct prof_irq));
		if (v) {
			struct prof_intr sum = {0};
			char name[PROF_COMM + 1] = "";
			for (int i = 0; i < ncpus_possible; i++) {
				const struct prof_irq *s = PERCPU_AT(v, struct prof_irq, i);
				intr_merge(&sum, &s->s);
				if (!name[0] && s->name[0])
					memcpy(name, s->name, PROF_COMM);
			}
			free(v);
			json_obj(j, NULL);
			json_int(j, "irq", irq);
			json_str(j, "name", name);
			emit_intr_fields(j, &sum);
			json_end(j);
		}
		cur_irq = irq;
		prev_irq = &cur_irq;
	}
	json_end(j);
	json_arr(j, "softirq");
	for (int v = 0; v < PROF_SOFTIRQS; v++)
		if (all->softirq_vec[v].count) {
			json_obj(j, NULL);
			json_int(j, "vec", v);
			json_str(j, "name", loader_softirq_name(v));
			emit_intr_fields(j, &all->softirq_vec[v]);
			json_end(j);
		}
	json_end(j);
	json_arr(j, "vectors");
	for (int v = 0; v < PV_MAX; v++)
		if (all->vec[v].count) {
			json_obj(j, NULL);
			json_str(j, "name", vector_names[v]);
			emit_intr_fields(j, &all->vec[v]);
			json_end(j);
		}
	json_end(j);
	json_arr(j, "per_cpu");
	for (int i = 0; i < ncpus_possible; i++) {
		const struct prof_cpu *c = PERCPU_AT(buf, struct prof_cpu, i);
		if (!c->hardirq.count && !c->softirq.count && !c->vector.count)
			continue;
		json_obj(j, NULL);
		json_int(j, "cpu", i);
		json_uint(j, "hardirq_count", c->hardirq.count);
		json_uint(j, "hardirq_ns", c->hardirq.ns);
		json_uint(j, "softirq_count", c->softirq.count);
		json_uint(j, "softirq_ns", c->softirq.ns);
		json_uint(j, "vector_count", c->vector.count);
		json_uint(j, "vector_ns", c->vector.ns);
		json_end(j);
	}
	json_end(j);
	json_emit(j);

	if (all->exits_lost) {
		j = json_record("threads_dropped");
		json_uint(j, "count", all->exits_lost);
		json_emit(j);
	}
	uint64_t lost = all->lost;
	free(all);
	free(buf);
	return lost;
}

static void emit_syscalls(void)
{
	struct json *j = json_record("syscalls");
	json_arr(j, "rows");
	__u32 nr, *prev = NULL;
	static __u32 cur;
	struct prof_syscall *sum = calloc(1, sizeof *sum);
	while (sum && bpf_map__get_next_key(skel->maps.syscalls, prev, &nr, sizeof nr) == 0) {
		void *v = percpu_value(skel->maps.syscalls, &nr, PERCPU_STRIDE(struct prof_syscall));
		if (v) {
			memset(sum, 0, sizeof *sum);
			for (int i = 0; i < ncpus_possible; i++) {
				const struct prof_syscall *s = PERCPU_AT(v, struct prof_syscall, i);
				sum->errors += s->errors;
				hist_merge(&sum->h, &s->h);
			}
			free(v);
			json_obj(j, NULL);
			json_int(j, "nr", nr);
			if (nr < sizeof syscall_names / sizeof syscall_names[0] && syscall_names[nr])
				json_str(j, "name", syscall_names[nr]);
			else {
				char name[32];
				snprintf(name, sizeof name, "syscall_%u", nr);
				json_str(j, "name", name);
			}
			json_uint(j, "count", sum->h.count);
			json_uint(j, "errors", sum->errors);
			emit_hist(j, "hist", &sum->h);
			json_end(j);
		}
		cur = nr;
		prev = &cur;
	}
	free(sum);
	json_end(j);
	json_emit(j);
}

static void emit_locks(void)
{
	struct json *j = json_record("locks");
	json_arr(j, "rows");
	struct prof_lock_key k, *prev = NULL;
	static struct prof_lock_key cur;
	while (bpf_map__get_next_key(skel->maps.locks, prev, &k, sizeof k) == 0) {
		struct prof_lock l;
		if (bpf_map__lookup_elem(skel->maps.locks, &k, sizeof k, &l, sizeof l, 0) == 0) {
			char addr[32], name[64];
			json_obj(j, NULL);
			snprintf(addr, sizeof addr, "0x%" PRIx64, (uint64_t)k.lock);
			json_str(j, "lock", addr);
			lock_name_of(l.named, name, sizeof name);
			if (name[0])
				json_str(j, "lock_name", name);
			else
				json_null(j, "lock_name");
			json_uint(j, "flags", k.flags);
			json_str(j, "kind", loader_lock_kind(k.flags));
			json_uint(j, "count", l.count);
			json_uint(j, "total_ns", l.total_ns);
			json_uint(j, "max_ns", l.max_ns);
			loader_emit_kstack(j, "stack", skel->maps.kstacks, k.stack);
			json_end(j);
		}
		cur = k;
		prev = &cur;
	}
	json_end(j);
	json_uint(j, "stacks_lost", skel->bss->lock_stacks_lost);
	json_emit(j);
}

static void emit_exits(void)
{
	struct prof_exit_key k, *prev = NULL;
	static struct prof_exit_key cur;
	while (bpf_map__get_next_key(skel->maps.exits, prev, &k, sizeof k) == 0) {
		struct prof_exit e;
		if (bpf_map__lookup_elem(skel->maps.exits, &k, sizeof k, &e, sizeof e, 0) == 0) {
			char comm[PROF_COMM + 1];
			memcpy(comm, e.comm, PROF_COMM);
			comm[PROF_COMM] = 0;
			struct json *j = json_record("thread");
			json_str(j, "when", "exit");
			json_str(j, "source", "bpf");
			json_uint(j, "tid", e.tid);
			json_uint(j, "tgid", e.tgid);
			json_str(j, "comm", comm);
			json_uint(j, "utime_ns", e.utime_ns);
			json_uint(j, "stime_ns", e.stime_ns);
			json_uint(j, "runtime_ns", e.runtime_ns);
			json_uint(j, "nvcsw", e.nvcsw);
			json_uint(j, "nivcsw", e.nivcsw);
			json_uint(j, "min_flt", e.min_flt);
			json_uint(j, "maj_flt", e.maj_flt);
			json_int(j, "cpu", e.cpu);
			json_emit(j);
		}
		cur = k;
		prev = &cur;
	}
}

static int lacking(const char *part)
{
	return loader_listed(missing.list, part) || loader_listed(skipped, part);
}

/* A part this kernel lacks gets no record: an empty table would read as
 * "none happened". */
/* The record run_lengths (runlen.h): one object per kind of kernel entry. */
static void emit_run_lengths(void)
{
	static const char *const names[PE_MAX] = {
		[PE_SYSCALL] = "syscall", [PE_FAULT] = "fault",	  [PE_HARDIRQ] = "hardirq",
		[PE_SOFTIRQ] = "softirq", [PE_VECTOR] = "vector",
	};
	struct json *j = json_record("run_lengths");
	loader_emit_run_lengths(j, skel->maps.runlens, names, PE_MAX);
	json_emit(j);
}

/* The record samples: period_ns, samples [{kind (user or kernel), id (the
 * thread's saved orig_ax in the kernel), name (that system call's), stack,
 * count}], lost. */
static void emit_samples(void)
{
	struct json *j = json_record("samples");
	json_uint(j, "period_ns", sample_period_ns);
	json_arr(j, "samples");
	struct prof_sample_key k, *prev = NULL;
	static struct prof_sample_key cur;
	while (bpf_map__get_next_key(skel->maps.sampled, prev, &k, sizeof k) == 0) {
		__u64 count;
		if (bpf_map__lookup_elem(skel->maps.sampled, &k, sizeof k, &count, sizeof count, 0) == 0) {
			json_obj(j, NULL);
			json_str(j, "kind", k.kernel ? "kernel" : "user");
			json_int(j, "id", k.id);
			if (k.kernel && k.id >= 0 && k.id < (long)(sizeof syscall_names / sizeof syscall_names[0]) &&
			    syscall_names[k.id])
				json_str(j, "name", syscall_names[k.id]);
			else
				json_null(j, "name");
			loader_emit_kstack(j, "stack", skel->maps.kstacks, k.stack);
			json_uint(j, "count", count);
			json_end(j);
		}
		cur = k;
		prev = &cur;
	}
	json_end(j);
	json_uint(j, "lost", skel->bss->samples_lost);
	json_emit(j);
}

void profile_bpf_emit(void)
{
	if (!skel)
		return;
	emit_exits();
	uint64_t lost = emit_cpu_records();
	if (!lacking("syscalls"))
		emit_syscalls();
	if (!lacking("lock_contention"))
		emit_locks();
	emit_run_lengths();
	if (sample_period_ns)
		emit_samples();
	struct json *j = json_record("bpf_stats");
	json_uint(j, "lost", lost);
	json_emit(j);
}

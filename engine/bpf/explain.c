/* The loader of explain.bpf.c (see explain.h): loads it for one repetition
 * of `run --explain`, charges the workers' threads within the measured
 * window, and writes what was charged as one `explain` record. */
#include "explain.h"
#include "locknames.h"
#include "../json.h"
#include "loader.h"

#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "explain.skel.h"
#include "syscall_names.h"

static struct explain_bpf *skel;
static struct loader_missing missing;
static struct bpf_link **fault_links;
static int n_fault_links;
static struct bpf_link **sample_links; /* the threads' clocks */
static int n_sample_links;
static uint64_t sample_period_ns; /* 0: not sampled */
static int light;		  /* light mode (explain.h) */

/* Light mode: the lock programs weighed when the window opens (explain.h). */
static struct {
	int worker_cpus;       /* the CPUs the workers are pinned to, each once */
	uint64_t set_ns;       /* CLOCK_MONOTONIC when the window was given: the start, about */
	uint64_t start_ns;     /* the window's start: the warm-up lies between */
	int weighed;	       /* 1 once the window opened */
	uint64_t seen[EL_MAX]; /* the warm-up's events, over every CPU */
	double per_cpu_s;      /* their rate per second of a worker's CPU */
	int untimed;	       /* the window ran without the begin program */
	int end_attached;      /* its end program still runs: a sleeping wait was open */
	double stack_share;    /* the chance a sleeping wait takes its stack */
} lock_waits;

/* Light mode: what its programs took, each program's runs and time from the
 * kernel's statistics at the window's first and last sample. The statistics
 * are on while stats_fd is open, for every BPF program of the system: two
 * clock reads per run, a few thousand runs a second in light mode. In full
 * mode they would add those reads to every system call the workers make,
 * and its cost shows in the throughput anyway. */
struct prog_time {
	uint64_t runs, ns;
};
static struct {
	int stats_fd;		 /* BPF_ENABLE_STATS; -1: off */
	char why[160];		 /* why they are not known: set whenever stats_fd is -1 in a light run */
	int n;			 /* programs of the object */
	struct prog_time *at[2]; /* at the first and the last sample */
	uint64_t taken_ns[2];	 /* CLOCK_MONOTONIC of each */
	int taken;		 /* 1: the first taken; 2: both */
} prog_times = {.stats_fd = -1};

/* What each optional program gives; NULL for the core. */
static const char *part_of(const struct bpf_program *p)
{
	const char *tp = loader_tp_name(p);
	if (tp && !strncmp(tp, "sys_", 4)) /* the core of full mode: its causes would not add up without them */
		return light ? "syscalls" : NULL;
	if (tp && !strncmp(tp, "sched_", 6) && light) /* light: the CPU clocks find each worker on or off its CPU */
		return "scheduler";
	if (!strcmp(bpf_program__name(p), "oslens_ex_sample") || !strcmp(bpf_program__name(p), "oslens_ex_sample_cpu"))
		return "samples";
	return loader_part_of(p);
}

/* Light mode: which workers each CPU's clock samples off it (explain.h). */
static void pin_workers(const int *tids, const int *cpus, int ntids)
{
	for (int i = 0; i < ntids; i++) {
		__u32 cpu = (__u32)cpus[i];
		struct explain_cpu_workers cw;
		if (cpus[i] < 0 || cpu >= EXPLAIN_MAX_CPUS ||
		    bpf_map__lookup_elem(skel->maps.cpu_workers, &cpu, sizeof cpu, &cw, sizeof cw, 0) != 0) {
			loader_missing_add(&missing, "off_cpu_samples");
			continue;
		}
		int k = 0;
		while (k < EXPLAIN_WORKERS_PER_CPU && cw.tid[k])
			k++;
		if (k == EXPLAIN_WORKERS_PER_CPU) {
			loader_missing_add(&missing, "off_cpu_samples"); /* more workers than slots on one CPU */
			continue;
		}
		cw.tid[k] = (__u32)tids[i];
		if (bpf_map__update_elem(skel->maps.cpu_workers, &cpu, sizeof cpu, &cw, sizeof cw, BPF_ANY) != 0)
			loader_missing_add(&missing, "off_cpu_samples");
	}
}

static uint64_t monotonic_ns(void);

/* Light mode: the statistics on, for the window's two snapshots. */
static void prog_times_begin(void)
{
	memset(&prog_times, 0, sizeof prog_times);
	prog_times.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (prog_times.stats_fd < 0) {
		snprintf(prog_times.why, sizeof prog_times.why, "the kernel's BPF statistics cannot be enabled: %s",
			 strerror(errno));
		return;
	}
	struct bpf_program *p;
	bpf_object__for_each_program(p, skel->obj) prog_times.n++;
	for (int i = 0; i < 2; i++)
		prog_times.at[i] = calloc((size_t)prog_times.n, sizeof(struct prog_time));
	if (!prog_times.at[0] || !prog_times.at[1])
		snprintf(prog_times.why, sizeof prog_times.why, "out of memory");
}

/* Snapshot i (0: the first sample, 1: the last) of every program's runs
 * and time; a program not loaded stays at zero. */
static void prog_times_take(int i)
{
	if (prog_times.why[0] || prog_times.taken != i)
		return;
	int k = 0;
	struct bpf_program *p;
	bpf_object__for_each_program(p, skel->obj)
	{
		struct bpf_prog_info info;
		__u32 len = sizeof info;
		memset(&info, 0, sizeof info);
		int fd = bpf_program__fd(p);
		if (k < prog_times.n && fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0)
			prog_times.at[i][k] = (struct prog_time){info.run_cnt, info.run_time_ns};
		k++;
	}
	prog_times.taken_ns[i] = monotonic_ns();
	prog_times.taken = i + 1;
}

static void prog_times_end(void)
{
	if (prog_times.stats_fd >= 0)
		close(prog_times.stats_fd);
	free(prog_times.at[0]);
	free(prog_times.at[1]);
	memset(&prog_times, 0, sizeof prog_times);
	prog_times.stats_fd = -1;
}

int explain_bpf_start(const int *tgids, int ntgids, const int *tids, const int *cpus, int ntids, int light_mode,
		      uint64_t period_ns, char *why, size_t whylen)
{
	explain_bpf_stop();
	missing.list[0] = 0;
	light = light_mode;
	memset(&lock_waits, 0, sizeof lock_waits);
	lock_waits.stack_share = 1;
	for (int i = 0; i < ntids; i++) {
		int seen = cpus[i] < 0;
		for (int k = 0; k < i && !seen; k++)
			seen = cpus[k] == cpus[i];
		lock_waits.worker_cpus += !seen;
	}
	loader_init();
	if (loader_check_usable(why, whylen) != 0)
		return -1;
	skel = explain_bpf__open();
	if (!skel) {
		snprintf(why, whylen, "cannot open the BPF object: %s", strerror(errno));
		return -1;
	}
	skel->rodata->light_mode = light;
	skel->rodata->light_period_ns = light ? period_ns : 0;
	/* light: nothing per system call, page fault or switch (the samples say
	 * where the time went, on a CPU and off it), and no counts per IPI or
	 * TLB flush */
	int fault_tps,
		err = loader_choose_programs(skel->obj, part_of,
					     light ? "syscalls,page_faults,scheduler,ipis_sent,tlb_flushes" : NULL,
					     &missing, &fault_tps, why, whylen);
	if (!err && light) /* the CPU clocks sample the workers: no clock per thread */
		bpf_program__set_autoload(skel->progs.oslens_ex_sample, 0);
	if (!err && (err = explain_bpf__load(skel)) != 0)
		loader_load_failed(err, why, whylen);
	if (err) {
		explain_bpf_stop();
		return -1;
	}
	for (int i = 0; i < ntgids; i++)
		if (tgids[i] > 0 &&
		    (unsigned)tgids[i] / 64 < sizeof skel->bss->followed / sizeof skel->bss->followed[0])
			skel->bss->followed[tgids[i] / 64] |= 1ull << (tgids[i] % 64);
	/* the master: this engine (in thread mode its main thread) and the oslens that started it */
	int masters[2] = {getpid(), getppid()};
	for (int i = 0; i < 2; i++)
		if (masters[i] > 1 &&
		    (unsigned)masters[i] / 64 < sizeof skel->bss->masters / sizeof skel->bss->masters[0])
			skel->bss->masters[masters[i] / 64] |= 1ull << (masters[i] % 64);
	if (loader_attach(skel->skeleton, part_of, &missing, why, whylen) != 0) {
		explain_bpf_stop();
		return -1;
	}
	if (light) {
		/* no fault is timed, and the CPU clocks explain_bpf_helpers
		 * attaches sample every probed thread: the workers on their
		 * CPUs and off them, the helpers on theirs */
		pin_workers(tids, cpus, ntids);
		prog_times_begin();
		sample_period_ns = period_ns;
		if (!sample_period_ns)
			loader_missing_add(&missing, "samples");
		return 0;
	}
	if (!fault_tps ||
	    loader_attach_sw_events(skel->progs.oslens_ex_fault_min, PERF_COUNT_SW_PAGE_FAULTS_MIN, tids, ntids, 1,
				    &fault_links, &n_fault_links) != 0 ||
	    loader_attach_sw_events(skel->progs.oslens_ex_fault_maj, PERF_COUNT_SW_PAGE_FAULTS_MAJ, tids, ntids, 1,
				    &fault_links, &n_fault_links) != 0) {
		/* a fault's end unseen: its time stays with the fault until the
		 * next system call; say that faults are not timed */
		loader_destroy_links(&fault_links, &n_fault_links);
		loader_missing_add(&missing, "page_faults");
	}
	sample_period_ns = 0;
	for (int i = 0; i < ntids; i++) { /* the workers have clocks of their own */
		__u32 tid = (__u32)tids[i];
		__u8 one = 1;
		bpf_map__update_elem(skel->maps.clocked, &tid, sizeof tid, &one, sizeof one, BPF_ANY);
	}
	if (period_ns && loader_attach_clocks(skel->progs.oslens_ex_sample, period_ns, tids, ntids, 1, &sample_links,
					      &n_sample_links) == 0)
		sample_period_ns = period_ns;
	else
		loader_missing_add(&missing, "samples");
	return 0;
}

static const char *const kind_names[EX_KIND_MAX] = {
	[EX_USER] = "user",	  [EX_SYSCALL] = "syscall",   [EX_FAULT] = "fault",	    [EX_LOCK] = "lock",
	[EX_IRQ] = "irq",	  [EX_SOFTIRQ] = "softirq",   [EX_VECTOR] = "vector",	    [EX_RUNQ] = "runq",
	[EX_BLOCKED] = "blocked", [EX_IPI_SENT] = "ipi_sent", [EX_TLB_FLUSH] = "tlb_flush", [EX_KERNEL] = "kernel",
};

static const char *const vector_names[EV_MAX] = {
	[EV_LOCAL_TIMER] = "local_timer",     [EV_RESCHEDULE] = "reschedule",
	[EV_CALL_FUNCTION] = "call_function", [EV_CALL_FUNCTION_SINGLE] = "call_function_single",
	[EV_IRQ_WORK] = "irq_work",
};

/* enum tlb_flush_reason of include/linux/mm_types.h */
static const char *const tlb_reasons[] = {"on_task_switch", "remote_shootdown", "local_shootdown", "local_mm_shootdown",
					  "remote_send_ipi"};

/* What a charge's id means, in words. */
static void name_of(const struct explain_key *k, char *buf, size_t len)
{
	buf[0] = 0;
	switch (k->kind) {
	case EX_SYSCALL:
	case EX_RUNQ:
	case EX_BLOCKED:
	case EX_KERNEL: /* a system call's name; where id is a fault's error code, its stack says so */
		if (k->id >= 0 && k->id < (long)(sizeof syscall_names / sizeof syscall_names[0]) &&
		    syscall_names[k->id])
			snprintf(buf, len, "%s", syscall_names[k->id]);
		else if (k->id >= 0)
			snprintf(buf, len, "syscall %" PRId64, (int64_t)k->id);
		break;
	case EX_FAULT: snprintf(buf, len, "%s", k->id == 1 ? "major" : k->id == 0 ? "minor" : "end not seen"); break;
	case EX_LOCK: lock_name_of(k->named, buf, len); break;
	case EX_IRQ: snprintf(buf, len, "irq %" PRId64, (int64_t)k->id); break;
	case EX_SOFTIRQ: snprintf(buf, len, "%s", loader_softirq_name(k->id) ? loader_softirq_name(k->id) : "?"); break;
	case EX_VECTOR:
		snprintf(buf, len, "%s",
			 k->id > 0 && k->id < EV_MAX && vector_names[k->id] ? vector_names[k->id] : "?");
		break;
	case EX_TLB_FLUSH:
		if (k->id >= 0 && k->id < (long)(sizeof tlb_reasons / sizeof tlb_reasons[0]))
			snprintf(buf, len, "%s", tlb_reasons[k->id]);
		break;
	}
}

int explain_bpf_helpers(const int *pids, const int *served, int n, const int *cpus, int ncpus, char *why, size_t whylen)
{
	if (!skel)
		return 0;
	for (int i = 0; i < n; i++) {
		__u32 tgid = (__u32)pids[i], worker = (__u32)served[i];
		if (pids[i] <= 0 || tgid / 64 >= sizeof skel->bss->helpers / sizeof skel->bss->helpers[0])
			continue;
		if (bpf_map__update_elem(skel->maps.helper_of, &tgid, sizeof tgid, &worker, sizeof worker, BPF_ANY)) {
			snprintf(why, whylen, "cannot follow helper %d: %s", pids[i], strerror(errno));
			return -1;
		}
		__atomic_fetch_or(&skel->bss->helpers[tgid / 64], 1ull << (tgid % 64), __ATOMIC_SEQ_CST);
	}
	/* the helpers are sampled where they run: the CPUs the run pins its
	 * tasks to; in light mode the workers there too */
	if (sample_period_ns && loader_attach_clocks(skel->progs.oslens_ex_sample_cpu, sample_period_ns, cpus, ncpus, 0,
						     &sample_links, &n_sample_links) != 0) {
		loader_missing_add(&missing, light ? "samples" : "helper_samples");
		if (light)
			sample_period_ns = 0;
	}
	return 0;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void explain_bpf_window(uint64_t start_ns, uint64_t end_ns)
{
	if (!skel)
		return;
	lock_waits.set_ns = monotonic_ns();
	lock_waits.start_ns = start_ns;
	/* the end first: a start already in the past must never meet the
	 * "no window yet" end */
	__atomic_store_n(&skel->data->window_end_ns, end_ns, __ATOMIC_SEQ_CST);
	__atomic_store_n(&skel->data->window_start_ns, start_ns, __ATOMIC_SEQ_CST);
}

/* Light mode: the end program goes once no sleeping wait is open, so
 * that none is left without its end. A begin program still under way
 * when its link went could open one after this read: it waits in the
 * kernel for no longer than it takes to run, and the read comes a
 * sample after the link went (or a millisecond, at the window's start). */
static void drop_lock_end(void)
{
	if (lock_waits.end_attached && !__atomic_load_n(&skel->bss->sleeping_lock_waits, __ATOMIC_ACQUIRE)) {
		bpf_link__destroy(skel->links.oslens_ex_lock_end);
		skel->links.oslens_ex_lock_end = NULL;
		lock_waits.end_attached = 0;
	}
}

/* Light mode, as the window opens: the warm-up's lock events, weighed
 * against the bound of explain.h. */
static void weigh_lock_waits(void)
{
	lock_waits.weighed = 1;
	int ncpus = libbpf_num_possible_cpus();
	__u64 *per_cpu = ncpus > 0 ? calloc((size_t)ncpus, sizeof *per_cpu) : NULL;
	for (__u32 kind = 0; per_cpu && kind < EL_MAX; kind++)
		if (bpf_map__lookup_elem(skel->maps.lock_events, &kind, sizeof kind, per_cpu,
					 (size_t)ncpus * sizeof *per_cpu, 0) == 0)
			for (int c = 0; c < ncpus; c++)
				lock_waits.seen[kind] += per_cpu[c];
	int counted = per_cpu != NULL;
	free(per_cpu);
	double warmup_s = lock_waits.start_ns > lock_waits.set_ns ? (lock_waits.start_ns - lock_waits.set_ns) / 1e9 : 0;
	if (!counted || warmup_s <= 0 || lock_waits.worker_cpus <= 0 || !skel->links.oslens_ex_lock_begin)
		return; /* nothing to weigh: the lock programs stay */
	uint64_t events = lock_waits.seen[EL_SPIN] + lock_waits.seen[EL_SLEEP];
	lock_waits.per_cpu_s = (double)events / (warmup_s * lock_waits.worker_cpus);
	double sleeping_per_cpu_s = (double)lock_waits.seen[EL_SLEEP] / (warmup_s * lock_waits.worker_cpus);
	if (sleeping_per_cpu_s > EXPLAIN_LIGHT_LOCK_STACKS_PER_S) {
		lock_waits.stack_share = EXPLAIN_LIGHT_LOCK_STACKS_PER_S / sleeping_per_cpu_s;
		__atomic_store_n(&skel->data->lock_stacks_below, (__u32)(lock_waits.stack_share * UINT32_MAX),
				 __ATOMIC_RELAXED);
	}
	if (lock_waits.per_cpu_s <= EXPLAIN_LIGHT_LOCK_EVENTS_PER_S ||
	    lock_waits.seen[EL_SLEEP] * EXPLAIN_LIGHT_SLEEP_SHARE >= events)
		return;
	bpf_link__destroy(skel->links.oslens_ex_lock_begin);
	skel->links.oslens_ex_lock_begin = NULL;
	lock_waits.untimed = 1;
	lock_waits.end_attached = skel->links.oslens_ex_lock_end != NULL;
	struct timespec ms = {0, 1000000};
	nanosleep(&ms, NULL);
	drop_lock_end();
}

void explain_bpf_sampled(int first, int last)
{
	if (!skel || !light)
		return;
	if (first && !lock_waits.weighed)
		weigh_lock_waits();
	else
		drop_lock_end();
	/* after the weighing: a program dropped then takes nothing in the window */
	if (first || last)
		prog_times_take(last);
}

/* Light mode: each program's runs and time between the window's first and
 * last sample, or why they are not known. */
static void emit_program_time(struct json *j)
{
	const char *why = prog_times.why[0]	  ? prog_times.why
			  : prog_times.taken != 2 ? "the window's first and last samples were not both taken"
						  : NULL;
	json_obj(j, "program_time");
	json_bool(j, "available", !why);
	if (why) {
		json_str(j, "reason", why);
		json_end(j);
		return;
	}
	json_uint(j, "window_ns", prog_times.taken_ns[1] - prog_times.taken_ns[0]);
	json_arr(j, "by_program");
	int k = 0;
	struct bpf_program *p;
	bpf_object__for_each_program(p, skel->obj)
	{
		const struct prog_time *a = &prog_times.at[0][k], *b = &prog_times.at[1][k];
		k++;
		if (b->runs <= a->runs)
			continue;
		json_obj(j, NULL);
		json_str(j, "name", bpf_program__name(p));
		json_uint(j, "runs", b->runs - a->runs);
		json_uint(j, "ns", b->ns - a->ns);
		json_end(j);
	}
	json_end(j);
	json_end(j);
}

/* A charge's tid, kind, id and name, as `charges` and `samples` write
 * them; a fault sampled is under way: minor or major is known at its end. */
static void emit_cause(struct json *j, const struct explain_key *k, int sampled)
{
	char name[64], addr[32];
	name_of(k, name, sizeof name);
	if (sampled && k->kind == EX_FAULT && k->id == 2)
		snprintf(name, sizeof name, "under way");
	json_int(j, "tid", k->tid);
	if (k->flags & EXF_HELPER)
		json_bool(j, "helper", 1);
	json_str(j, "kind", k->kind < EX_KIND_MAX && kind_names[k->kind] ? kind_names[k->kind] : "?");
	if (k->kind == EX_LOCK || k->kind == EX_IPI_SENT) {
		snprintf(addr, sizeof addr, "0x%" PRIx64, (uint64_t)k->id);
		json_str(j, "id", addr);
	} else {
		json_int(j, "id", k->id);
	}
	if (name[0])
		json_str(j, "name", name);
	else
		json_null(j, "name");
}

/* sample_period_ns, samples [{tid, kind, id, name, (lock_kind,) stack,
 * count}] and samples_lost. */
static void emit_samples(struct json *j)
{
	json_uint(j, "sample_period_ns", sample_period_ns);
	json_arr(j, "samples");
	struct explain_sample_key k, *prev = NULL;
	static struct explain_sample_key cur;
	while (bpf_map__get_next_key(skel->maps.sampled, prev, &k, sizeof k) == 0) {
		__u64 count;
		if (bpf_map__lookup_elem(skel->maps.sampled, &k, sizeof k, &count, sizeof count, 0) == 0) {
			struct explain_key cause = {
				.tid = k.tid, .kind = k.kind, .flags = k.flags, .named = k.named, .id = k.id};
			json_obj(j, NULL);
			emit_cause(j, &cause, 1);
			if (k.kind == EX_LOCK)
				json_str(j, "lock_kind", loader_lock_kind(k.flags & ~EXF_MARKS));
			if (k.flags & EXF_OFF_CPU)
				json_bool(j, "off_cpu", 1);
			loader_emit_kstack(j, "stack", skel->maps.kstacks, k.stack);
			json_uint(j, "count", count);
			json_end(j);
		}
		cur = k;
		prev = &cur;
	}
	json_end(j);
	json_uint(j, "samples_lost", skel->bss->samples_lost);
	if (light)
		json_uint(j, "off_cpu_unseen", skel->bss->off_cpu_unseen);
}

/* runq_takers [{tid, comm, kthread, who, (taker_tid,) ns, count}]: who had
 * the CPU a runnable worker waited for; an interrupt's comm is its name. */
static void emit_runq_takers(struct json *j)
{
	static const char *const whos[] = {
		[RQ_WORKER] = "worker", [RQ_MASTER] = "master",	      [RQ_KTHREAD] = "kernel thread",
		[RQ_OTHER] = "other",	[RQ_INTERRUPT] = "interrupt", [RQ_CHILD] = "child"};
	json_arr(j, "runq_takers");
	struct runq_taker_key k, *prev = NULL;
	static struct runq_taker_key cur;
	while (bpf_map__get_next_key(skel->maps.runq_takers, prev, &k, sizeof k) == 0) {
		struct explain_val v;
		if (bpf_map__lookup_elem(skel->maps.runq_takers, &k, sizeof k, &v, sizeof v, 0) == 0) {
			char comm[sizeof k.comm + 1];
			if (k.who == RQ_INTERRUPT) {
				struct explain_key ik = {.kind = k.kind, .id = k.id};
				name_of(&ik, comm, sizeof comm);
			} else {
				memcpy(comm, k.comm, sizeof k.comm);
				comm[sizeof k.comm] = 0;
			}
			json_obj(j, NULL);
			json_int(j, "tid", k.tid);
			json_str(j, "comm", comm);
			json_bool(j, "kthread", k.who == RQ_KTHREAD);
			json_str(j, "who", k.who < sizeof whos / sizeof whos[0] && whos[k.who] ? whos[k.who] : "?");
			if (k.taker)
				json_int(j, "taker_tid", k.taker);
			json_uint(j, "ns", v.ns);
			json_uint(j, "count", v.count);
			json_end(j);
		}
		cur = k;
		prev = &cur;
	}
	json_end(j);
}

void explain_bpf_emit(int rep)
{
	if (!skel)
		return;
	struct json *j = json_record("explain");
	json_int(j, "rep", rep);
	json_bool(j, "available", 1);
	json_str(j, "mode", light ? "light" : "full");
	/* light: the workers sampled off their CPUs too, so the window's time
	 * outside the exact charges is the samples' to split (explain.h) */
	if (light)
		json_bool(j, "off_cpu_sampled", 1);
	/* what ran in the kernel for it: light mode's cost claim is checked against this */
	json_arr(j, "programs");
	struct bpf_program *p;
	bpf_object__for_each_program(p, skel->obj)
	{
		if (bpf_program__autoload(p))
			json_str(j, NULL, bpf_program__name(p));
	}
	json_end(j);
	if (light && lock_waits.weighed) {
		/* the warm-up's lock events, and whether the window timed the waits that sleep */
		json_obj(j, "lock_waits");
		json_uint(j, "spinning", lock_waits.seen[EL_SPIN]);
		json_uint(j, "sleeping", lock_waits.seen[EL_SLEEP]);
		json_num(j, "per_cpu_s", lock_waits.per_cpu_s);
		json_uint(j, "bound_per_cpu_s", EXPLAIN_LIGHT_LOCK_EVENTS_PER_S);
		json_bool(j, "sleeping_timed", !lock_waits.untimed);
		json_bool(j, "end_attached", !lock_waits.untimed || lock_waits.end_attached);
		json_num(j, "stack_share", lock_waits.stack_share);
		json_uint(j, "stacks_bound_per_cpu_s", EXPLAIN_LIGHT_LOCK_STACKS_PER_S);
		json_end(j);
	}
	if (light)
		emit_program_time(j);
	json_uint(j, "window_start_ns", skel->data->window_start_ns);
	json_uint(j, "window_end_ns", skel->data->window_end_ns);
	json_uint(j, "lost", skel->bss->lost);
	json_uint(j, "lock_stacks_lost", skel->bss->lock_stacks_lost);
	int rq_locks = 0; /* run queue locks learned: the CPUs that switched */
	__u64 key, *prevkey = NULL;
	static __u64 curkey;
	while (bpf_map__get_next_key(skel->maps.rq_locks, prevkey, &key, sizeof key) == 0) {
		rq_locks++;
		curkey = key;
		prevkey = &curkey;
	}
	json_int(j, "rq_locks", rq_locks);
	json_list(j, "missing", missing.list);
	/* [tid, kind, id, name, ns, count] and, for a lock, its kind, caller
	 * stack and where it was named */
	json_arr(j, "charges");
	struct explain_key k, *prev = NULL;
	static struct explain_key cur;
	while (bpf_map__get_next_key(skel->maps.charged, prev, &k, sizeof k) == 0) {
		struct explain_val v;
		if (bpf_map__lookup_elem(skel->maps.charged, &k, sizeof k, &v, sizeof v, 0) == 0) {
			json_obj(j, NULL);
			emit_cause(j, &k, 0);
			json_uint(j, "ns", v.ns);
			json_uint(j, "count", v.count);
			if (k.kind == EX_LOCK) {
				json_str(j, "lock_kind", loader_lock_kind(k.flags & ~EXF_MARKS));
				loader_emit_kstack(j, "stack", skel->maps.kstacks, k.stack);
				if (k.flags & EXF_UNSTACKED)
					json_bool(j, "stack_taken", 0);
			}
			json_end(j);
		}
		cur = k;
		prev = &cur;
	}
	json_end(j);
	emit_runq_takers(j);
	if (sample_period_ns)
		emit_samples(j);
	static const char *const entries[EE_MAX] = {"syscall", "fault", "interrupt"};
	loader_emit_run_lengths(j, skel->maps.runlens, entries, EE_MAX);
	json_emit(j);
}

void explain_bpf_stop(void)
{
	loader_destroy_links(&sample_links, &n_sample_links);
	loader_destroy_links(&fault_links, &n_fault_links);
	prog_times_end();
	if (skel) {
		explain_bpf__destroy(skel);
		skel = NULL;
	}
}

/* What every BPF loader of the engine needs (noise attribution in noise.c,
 * the profiler in profile.c): privilege and kernel checks that
 * turn a failure into a reason a user can act on, the list of tracepoints
 * this kernel has, the list of what it lacks, and software perf events that
 * run a program on every CPU. */
#ifndef OSLENS_BPF_LOADER_H
#define OSLENS_BPF_LOADER_H

#include <linux/types.h>
#include <stddef.h>
#include <stdint.h>

struct bpf_program;
struct bpf_link;
struct bpf_object_skeleton;

/* libbpf's messages kept quiet but remembered (OSLENS_TRACE_DEBUG=1 shows
 * them all), and RLIMIT_NOFILE raised: per-CPU perf events on hundreds of
 * CPUs would exceed the default soft limit. */
void loader_init(void);
/* libbpf's last warning since loader_clear_warning(): the cause of a failure. */
const char *loader_last_warning(void);
void loader_clear_warning(void);

/* 0 if this process may load BPF and the kernel has BTF; else -1 and why. */
int loader_check_usable(char *why, size_t whylen);
/* Why an EPERM happened: missing privilege, or a kernel that refuses even
 * the privileged (lockdown, a security module). */
void loader_eperm_reason(char *why, size_t whylen);

/* tracefs's list of events as "\nsystem:event\n..."; NULL if tracefs is not
 * mounted (then attaching is the test). Free it. */
char *loader_available_events(void);
/* Whether `events` (from loader_available_events, or NULL) has tracepoint `tp`. */
int loader_has_tracepoint(const char *events, const char *tp);
/* "raw_tp/irq_handler_entry" -> "irq_handler_entry"; NULL if not a raw tracepoint. */
const char *loader_tp_name(const struct bpf_program *p);

/* A comma-separated set of names of what this kernel lacks. */
struct loader_missing {
	char list[512];
};
void loader_missing_add(struct loader_missing *m, const char *what);
/* entry/exit tracepoint pairs are one thing: "local_timer_entry" -> "local_timer" */
void loader_missing_add_tp(struct loader_missing *m, const char *tp);

/* Attaches every program of the skeleton that was loaded, has a section
 * libbpf can attach by itself (not "perf_event") and that `skip` (may be
 * NULL) does not exclude; the ends of intervals (..._exit, fexit/...,
 * contention_end) before their starts: an end whose start was not seen is
 * ignored, whereas a start whose end is not attached yet would stay open.
 * The links go to the skeleton, whose destroy detaches them. For a program
 * that will not attach, `failed` gets errno and returns nonzero to give up,
 * which returns -1. */
int loader_attach_ends_first(struct bpf_object_skeleton *s, int (*skip)(const struct bpf_program *p, void *arg),
			     int (*failed)(const struct bpf_program *p, int err, void *arg), void *arg);

/* Whether the comma-separated `list` has `name`. */
int loader_listed(const char *list, const char *name);

/* Software perf events counting `config` (PERF_COUNT_SW_*) with period 1,
 * each running `prog` at every event: one per CPU of `targets` (every task
 * there), or with `tasks` one per thread id of `targets`, inherited by the
 * threads and processes it creates later. Appends the links to *links; on
 * failure destroys what it made and returns -1. */
int loader_attach_sw_events(struct bpf_program *prog, uint64_t config, const int *targets, int n, int tasks,
			    struct bpf_link ***links, int *nlinks);
/* A clock per target running `prog` every `period_ns`: with `tasks`, per
 * thread of `targets`, ticking only while the thread runs (its time on a
 * CPU: `perf record -e cpu-clock`'s event, so the two compare), not
 * inherited by what it creates (inherited, it stopped sampling a forking
 * thread here: a fork probe's worker gave 1 sample where 120 were due);
 * else per CPU of `targets`, whatever runs there (prog decides what to
 * keep). PERF_COUNT_SW_CPU_CLOCK: no PMU needed. Like
 * loader_attach_sw_events otherwise. */
int loader_attach_clocks(struct bpf_program *prog, uint64_t period_ns, const int *targets, int n, int tasks,
			 struct bpf_link ***links, int *nlinks);
void loader_destroy_links(struct bpf_link ***links, int *nlinks);

/* A softirq vector's name (TIMER, NET_RX, ...), or NULL. */
const char *loader_softirq_name(long vec);
/* A contended lock's kind from contention_begin's LCB_F_* flags
 * ("spinlock", "rwsem:W", "mutex", ...). */
const char *loader_lock_kind(unsigned flags);

/* What a program of either loader gives, for the `missing` list: the part
 * of the attribution it belongs to ("page_faults", "lock_contention", …),
 * its tracepoint's name for an x86 vector, NULL for the scheduler core. A
 * loader decides the system-call tracepoints (core or optional) itself. */
const char *loader_part_of(const struct bpf_program *p);
/* Adds p's part to m: an entry/exit pair by its one name. */
void loader_note_missing(struct loader_missing *m, const struct bpf_program *p, const char *part);

struct bpf_object;
typedef const char *(*loader_part_fn)(const struct bpf_program *p);
/* Sets each program of obj to load where this kernel has its tracepoint (a
 * perf_event fault end where it has page_fault_user; a perf_event program
 * of another part always), never a part listed
 * in `skip` (comma-separated, may be NULL); notes in m what cannot load.
 * *fault_tps: whether faults can be timed. 0, or -1 with `why` when a core
 * program (part_of gives NULL) has no tracepoint here. */
int loader_choose_programs(struct bpf_object *obj, loader_part_fn part_of, const char *skip, struct loader_missing *m,
			   int *fault_tps, char *why, size_t whylen);
/* `why` for a skeleton's load that returned err: a privilege a user can
 * grant, or the verifier's last words. */
void loader_load_failed(int err, char *why, size_t whylen);
/* loader_attach_ends_first, where an optional part that will not attach is
 * noted in m and a core program fails the whole with `why`. */
int loader_attach(struct bpf_object_skeleton *s, loader_part_fn part_of, struct loader_missing *m, char *why,
		  size_t whylen);

struct json;
struct bpf_map;
/* The kernel stack stored under `hash` in a kstacks map (kstack.h), as
 * `name`: [] for 0 (user space) or a stack no longer there. */
void loader_emit_kstack(struct json *j, const char *name, const struct bpf_map *kstacks, __u64 hash);
/* An array `name` of kernel addresses (hex strings) of ips[0..depth),
 * up to the first 0; empty for NULL. */
void loader_emit_ips(struct json *j, const char *name, const __u64 *ips, int depth);
/* A "run_lengths" object from a per-CPU array of struct runlen (runlen.h),
 * summed over the CPUs: {names[k]: {count, sum_ns, over: [[ns, count,
 * sum_ns]…], log2_hist: [[b, count]…]}} for the keys 0..n-1. */
void loader_emit_run_lengths(struct json *j, const struct bpf_map *runlens, const char *const *names, int n);

#endif

/* Noise attribution, user side: loads noise.bpf.c (through the skeleton
 * bpftool generated from it), tells it which CPUs and threads are probed,
 * and turns its ring-buffer records into struct trace_event. libbpf is
 * linked in statically, so the engine still needs nothing but libc. */
#include "../engine.h"
#include "noise.h"
#include "../event_batch.h"
#include "../json.h"
#include "../topology.h"
#include "loader.h"

#include <errno.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <linux/types.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "noise.skel.h"

static struct noise_bpf *skel;
static struct ring_buffer *rb;
static void (*poll_cb)(const struct trace_event *, void *);
static void *poll_arg;
static int poll_count;
static struct loader_missing missing; /* what this kernel lacks: "threshold_apic,deferred_error,..." */
static struct bpf_link **perf_links;  /* the fault-end programs on their perf events */
static int n_perf_links;
static pid_t owner; /* the process that called noise_bpf_start */

/* How the faults of the probed threads are timed (see noise.bpf.c). */
enum fault_mode { FAULT_NONE, FAULT_TP, FAULT_FENTRY };

/* ---- names ---- */

static const char *const vector_names[NV_MAX] = {
	[NV_LOCAL_TIMER] = "local_timer",
	[NV_RESCHEDULE] = "reschedule",
	[NV_CALL_FUNCTION] = "call_function",
	[NV_CALL_FUNCTION_SINGLE] = "call_function_single",
	[NV_IRQ_WORK] = "irq_work",
	[NV_THERMAL_APIC] = "thermal_apic",
	[NV_THRESHOLD_APIC] = "threshold_apic",
	[NV_DEFERRED_ERROR] = "deferred_error",
	[NV_ERROR_APIC] = "error_apic",
	[NV_SPURIOUS_APIC] = "spurious_apic",
	[NV_X86_PLATFORM_IPI] = "x86_platform_ipi",
};

/* NMI handlers are few: each address is looked up in /proc/kallsyms once. */
static struct {
	uint64_t addr;
	char name[NOISE_NAME];
} nmi_syms[16];
static int n_nmi_syms;

static void nmi_name(uint64_t addr, char *out)
{
	for (int i = 0; i < n_nmi_syms; i++)
		if (nmi_syms[i].addr == addr) {
			memcpy(out, nmi_syms[i].name, NOISE_NAME);
			return;
		}
	snprintf(out, NOISE_NAME, "0x%" PRIx64, addr);
	FILE *f = fopen("/proc/kallsyms", "r");
	if (f) {
		char line[512], sym[256];
		unsigned long long a;
		char type;
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && a == addr) {
				snprintf(out, NOISE_NAME, "%.*s", NOISE_NAME - 1, sym);
				break;
			}
		fclose(f);
	}
	if (n_nmi_syms < (int)(sizeof nmi_syms / sizeof nmi_syms[0])) {
		nmi_syms[n_nmi_syms].addr = addr;
		memcpy(nmi_syms[n_nmi_syms++].name, out, NOISE_NAME);
	}
}

/* The address of a kernel function by its name, 0 where kallsyms hides it
 * (kptr_restrict) or has no such symbol. */
static uint64_t kernel_function(const char *name)
{
	uint64_t out = 0;
	FILE *f = fopen("/proc/kallsyms", "r");
	if (!f)
		return 0;
	char line[512], sym[256];
	unsigned long long a;
	char type;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && (type == 't' || type == 'T') &&
		    !strcmp(sym, name)) {
			out = a;
			break;
		}
	fclose(f);
	return out;
}

/* ---- events ---- */

static int on_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	const struct noise_event *n = data;
	if (size < sizeof *n)
		return 0;
	struct trace_event e = {
		.start_ns = n->start_ns,
		.end_ns = n->end_ns,
		.cpu = n->cpu,
		.kind = n->kind,
		.id = n->id,
		.flags = n->flags,
	};
	memcpy(e.name, n->name, sizeof e.name);
	e.name[sizeof e.name - 1] = 0;
	switch (n->kind) {
	case TRACE_SOFTIRQ:
		if (loader_softirq_name(n->id))
			snprintf(e.name, sizeof e.name, "%s", loader_softirq_name(n->id));
		else
			snprintf(e.name, sizeof e.name, "softirq%lld", (long long)n->id);
		break;
	case TRACE_VECTOR:
		snprintf(e.name, sizeof e.name, "%s",
			 n->sub < NV_MAX && vector_names[n->sub] ? vector_names[n->sub] : "?");
		break;
	case TRACE_NMI: nmi_name(n->aux, e.name); break;
	}
	poll_count++;
	if (poll_cb)
		poll_cb(&e, poll_arg);
	return 0;
}

/* ---- loading ---- */

static int whyf(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int whyf(char *why, size_t whylen, const char *fmt, ...)
{
	if (why && whylen) {
		int n = snprintf(why, whylen, "attribution unavailable: ");
		va_list ap;
		va_start(ap, fmt);
		if (n >= 0 && (size_t)n < whylen)
			vsnprintf(why + n, whylen - n, fmt, ap);
		va_end(ap);
	}
	noise_bpf_stop();
	return -1;
}

static int priv_why(char *why, size_t whylen)
{
	char reason[256];
	loader_eperm_reason(reason, sizeof reason);
	return whyf(why, whylen, "%s", reason);
}

static int is_fault_fentry(const struct bpf_program *p)
{
	return strstr(bpf_program__section_name(p), "handle_mm_fault") != NULL;
}

static int is_fault_perf(const struct bpf_program *p)
{
	return !strcmp(bpf_program__section_name(p), "perf_event");
}

static int is_fault_tp(const struct bpf_program *p)
{
	const char *tp = loader_tp_name(p);
	return tp && !strncmp(tp, "page_fault_", 11);
}

/* Without these the intervals are not worth having. */
static int required(const struct bpf_program *p)
{
	const char *tp = loader_tp_name(p);
	return tp && (!strncmp(tp, "irq_handler_", 12) || !strncmp(tp, "softirq_", 8) || !strcmp(tp, "sched_switch"));
}

static void note_missing(const char *what)
{
	loader_missing_add(&missing, what);
}

static void note_missing_tp(const char *tp)
{
	loader_missing_add_tp(&missing, tp);
}

/* Opens the skeleton with the programs this kernel can take, and loads it. */
static int open_and_load(int ncpus_possible, int ntids, enum fault_mode faults, const char *events_list, char *why,
			 size_t whylen)
{
	skel = noise_bpf__open();
	if (!skel)
		return whyf(why, whylen, "cannot open the BPF object: %s", strerror(errno));
	bpf_map__set_max_entries(skel->maps.cpus, ncpus_possible);
	bpf_map__set_max_entries(skel->maps.tids, ntids > 0 ? ntids : 1);
	skel->rodata->hrtimer_wakeup_fn = ntids > 0 ? kernel_function("hrtimer_wakeup") : 0;

	struct bpf_program *p;
	bpf_object__for_each_program(p, skel->obj)
	{
		const char *tp = loader_tp_name(p);
		int load = 1;
		if (ntids == 0 && tp && !strcmp(tp, "sched_switch"))
			load = 0; /* no probed threads: no tasks to attribute */
		else if (tp && !strcmp(tp, "hrtimer_expire_entry") && !skel->rodata->hrtimer_wakeup_fn) {
			load = 0; /* no sleeper's callback to recognise */
			if (ntids > 0)
				note_missing("timer_callbacks");
		} else if (is_fault_tp(p) || is_fault_perf(p))
			load = faults == FAULT_TP;
		else if (is_fault_fentry(p))
			load = faults == FAULT_FENTRY;
		else if (tp) {
			if (!loader_has_tracepoint(events_list, tp)) {
				if (required(p))
					return whyf(why, whylen, "this kernel has no tracepoint %s", tp);
				load = 0;
				note_missing_tp(tp);
			}
		}
		bpf_program__set_autoload(p, load);
	}
	loader_clear_warning();
	int err = noise_bpf__load(skel);
	if (err) {
		int e = -err;
		if (e == EPERM)
			return priv_why(why, whylen);
		return whyf(why, whylen, "the kernel rejected the BPF programs (%s)%s%s", strerror(e),
			    *loader_last_warning() ? ": " : "", loader_last_warning());
	}
	return 0;
}

static void destroy_perf_links(void)
{
	loader_destroy_links(&perf_links, &n_perf_links);
}

/* One minor-fault and one major-fault software event per probed CPU, each
 * overflowing at every fault into its oslens_fault_* program. */
static int attach_fault_ends(const int *cpus, int ncpus)
{
	if (loader_attach_sw_events(skel->progs.oslens_fault_min, PERF_COUNT_SW_PAGE_FAULTS_MIN, cpus, ncpus, 0,
				    &perf_links, &n_perf_links) == 0 &&
	    loader_attach_sw_events(skel->progs.oslens_fault_maj, PERF_COUNT_SW_PAGE_FAULTS_MAJ, cpus, ncpus, 0,
				    &perf_links, &n_perf_links) == 0)
		return 0;
	destroy_perf_links();
	return -1;
}

struct attach_ctx {
	enum fault_mode faults;
	char *why;
	size_t whylen;
};

static int skip_fault_tp(const struct bpf_program *p, void *arg)
{
	return is_fault_tp(p) && ((struct attach_ctx *)arg)->faults != FAULT_TP;
}

/* Without a required program attribution fails; without another, that
 * source is noted as missing. */
static int attach_failed(const struct bpf_program *p, int err, void *arg)
{
	struct attach_ctx *c = arg;
	const char *sec = bpf_program__section_name(p);
	if (required(p))
		return err == EPERM ? priv_why(c->why, c->whylen)
				    : whyf(c->why, c->whylen, "cannot attach to %s: %s", sec, strerror(err));
	const char *tp = loader_tp_name(p);
	if (is_fault_fentry(p) || is_fault_tp(p))
		note_missing("page_faults");
	else if (tp)
		note_missing_tp(tp);
	else
		note_missing(sec);
	return 0;
}

int noise_bpf_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = 0;
	noise_bpf_stop();
	missing.list[0] = 0;
	loader_init();
	static int atexit_done;
	if (!atexit_done) {
		atexit(noise_bpf_stop);
		atexit_done = 1;
	}
	owner = getpid();

	char reason[256];
	if (loader_check_usable(reason, sizeof reason) != 0)
		return whyf(why, whylen, "%s", reason);
	int possible = libbpf_num_possible_cpus();
	if (possible <= 0)
		return whyf(why, whylen, "cannot count the possible CPUs: %s", strerror(-possible));
	if (ncpus <= 0)
		return whyf(why, whylen, "no CPU to trace");
	for (int i = 0; i < ncpus; i++)
		if (cpus[i] < 0 || cpus[i] >= possible)
			return whyf(why, whylen, "CPU %d does not exist (%d possible)", cpus[i], possible);

	/* Faults: the exceptions tracepoints (x86) with perf's fault accounting
	 * as the end, else fentry/fexit on handle_mm_fault if BTF knows it. If
	 * loading fails with them, the rest is still worth having. */
	char *events_list = loader_available_events();
	enum fault_mode faults = FAULT_NONE;
	if (ntids > 0) {
		if (!events_list || strstr(events_list, ":page_fault_user\n")) {
			faults = FAULT_TP;
		} else {
			struct btf *vmlinux = btf__load_vmlinux_btf();
			if (vmlinux && btf__find_by_name_kind(vmlinux, "handle_mm_fault", BTF_KIND_FUNC) >= 0)
				faults = FAULT_FENTRY;
			btf__free(vmlinux);
		}
		if (faults == FAULT_NONE)
			note_missing("page_faults");
	}
	int err = open_and_load(possible, ntids, faults, events_list, why, whylen);
	if (err && faults != FAULT_NONE) {
		faults = FAULT_NONE;
		note_missing("page_faults");
		err = open_and_load(possible, ntids, faults, events_list, why, whylen);
	}
	free(events_list);
	if (err)
		return -1;

	__u8 one = 1;
	for (int i = 0; i < ncpus; i++) {
		__u32 cpu = (__u32)cpus[i];
		if (bpf_map__update_elem(skel->maps.cpus, &cpu, sizeof cpu, &one, sizeof one, BPF_ANY))
			return whyf(why, whylen, "cannot set up the CPU map: %s", strerror(errno));
	}
	struct tid_state zero = {0};
	for (int i = 0; i < ntids; i++) {
		__u32 tid = (__u32)tids[i];
		if (bpf_map__update_elem(skel->maps.tids, &tid, sizeof tid, &zero, sizeof zero, BPF_ANY))
			return whyf(why, whylen, "cannot set up the thread map: %s", strerror(errno));
	}

	if (faults == FAULT_TP && attach_fault_ends(cpus, ncpus) != 0) {
		faults = FAULT_NONE;
		note_missing("page_faults");
	}

	struct attach_ctx ctx = {faults, why, whylen};
	if (loader_attach_ends_first(skel->skeleton, skip_fault_tp, attach_failed, &ctx) != 0)
		return -1;

	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_record, NULL, NULL);
	if (!rb)
		return whyf(why, whylen, "cannot map the ring buffer: %s", strerror(errno));
	return 0;
}

int noise_bpf_poll(void (*cb)(const struct trace_event *e, void *arg), void *arg, int timeout_ms)
{
	if (!rb)
		return -1;
	poll_cb = cb;
	poll_arg = arg;
	poll_count = 0;
	/* The BPF side does not wake us (that would be noise on the probed
	 * CPU): take what is there, else sleep and look again. */
	int n = ring_buffer__consume(rb);
	if (n == 0 && timeout_ms > 0) {
		n = ring_buffer__poll(rb, timeout_ms);
		if (n == -EINTR)
			n = 0;
		if (n >= 0)
			n = ring_buffer__consume(rb);
	}
	poll_cb = NULL;
	return n < 0 ? -1 : poll_count;
}

uint64_t noise_bpf_lost(void)
{
	return skel && skel->bss ? skel->bss->lost : 0;
}

/* The event sources this kernel could not give (comma-separated). */
const char *noise_bpf_missing(void)
{
	return missing.list;
}

void noise_bpf_stop(void)
{
	if (owner && getpid() != owner) {
		/* A forked child (a worker that exits) holds copies of the fds:
		 * leave them to its exit. Destroying would PERF_EVENT_IOC_DISABLE
		 * the perf events the parent still uses. */
		skel = NULL;
		rb = NULL;
		perf_links = NULL;
		n_perf_links = 0;
		return;
	}
	destroy_perf_links();
	if (rb) {
		ring_buffer__free(rb);
		rb = NULL;
	}
	if (skel) {
		noise_bpf__destroy(skel);
		skel = NULL;
	}
}

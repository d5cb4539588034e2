/* The attribution parts of `run` (run_parts.h): each a few lines between
 * the master's phases and a loader's interface (bpf/x.h, which an engine
 * without BPF implements with x_none.c, saying why), with its option's help
 * and its checks, then the table. */
#include "run_parts.h"
#include "bpf/blkio.h"
#include "bpf/explain.h"
#include "event_batch.h"
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* ---- --trace: the kernel's events on the workers' CPUs, for their threads
 * (bpf/noise.h), streamed as `events` records while the master sleeps. */

static struct event_batch events; /* recorded, not yet written */

static int trace_attach(const struct run_view *v, char *why, size_t whylen)
{
	return noise_bpf_start(v->cpus, v->nworkers, v->tids, v->nworkers, why, whylen);
}

/* The `trace` record as the `trace` command writes it: without a rep. */
static void trace_unavailable(int rep, const char *why)
{
	(void)rep;
	event_batch_unavailable(why);
}

static void trace_collect(int timeout_ms)
{
	noise_bpf_poll(event_batch_add, &events, timeout_ms);
}

/* Whatever happened: the `trace` record says how complete the events
 * already written are. */
static void trace_emit(int rep, int measured)
{
	(void)rep, (void)measured;
	event_batch_finish(&events, 0);
}

static const struct run_part trace_part = {
	.name = "trace",
	.help = "the kernel's events on the workers' CPUs, for their threads",
	.bpf = 1,
	.attach = trace_attach,
	.unavailable = trace_unavailable,
	.collect = trace_collect,
	.emit = trace_emit,
	.detach = noise_bpf_stop,
};

/* ---- --explain: every instant of every worker thread in the window
 * charged to one cause (bpf/explain.h). */

static int explain_check(const struct run_config *cfg, char *why, size_t whylen)
{
	if (!cfg->ops)
		return 0;
	snprintf(why, whylen, "--explain charges a fixed window of time: use --duration, not --ops");
	return -1;
}

static const struct run_part explain_part, explain_light_part; /* below: each names its default period */

/* The workers, and the partners that serve them: what a worker waits for
 * in its semop or futex is their doing. */
static int explain_attach_mode(const struct run_view *v, const struct run_part *part, char *why, size_t whylen)
{
	int light = part == &explain_light_part;
	uint64_t period = (uint64_t)(v->cfg->sample_period_ns >= 0 ? v->cfg->sample_period_ns : part->sample_period_ns);
	if (explain_bpf_start(v->pids, v->nworkers, v->tids, v->cpus, v->nworkers, light, period, why, whylen) != 0)
		return -1;
	int cpus[2 * v->nworkers], ncpus = 0; /* the workers' and their partners' CPUs, each once */
	for (int i = 0; i < 2 * v->nworkers; i++) {
		int cpu = i < v->nworkers ? v->cpus[i] : v->cfg->partner_cpus[i - v->nworkers], seen = cpu < 0;
		for (int k = 0; k < ncpus && !seen; k++)
			seen = cpus[k] == cpu;
		if (!seen)
			cpus[ncpus++] = cpu;
	}
	return explain_bpf_helpers(v->helpers, v->served, v->nhelpers, cpus, ncpus, why, whylen);
}

static int explain_attach(const struct run_view *v, char *why, size_t whylen)
{
	return explain_attach_mode(v, &explain_part, why, whylen);
}

static int explain_light_attach(const struct run_view *v, char *why, size_t whylen)
{
	return explain_attach_mode(v, &explain_light_part, why, whylen);
}

static void explain_window(const struct run_view *v, uint64_t start_ns, uint64_t end_ns)
{
	(void)v;
	explain_bpf_window(start_ns, end_ns);
}

static void explain_emit(int rep, int measured)
{
	if (measured)
		explain_bpf_emit(rep);
}

static const struct run_part explain_part = {
	.name = "explain",
	.help = "every instant of the workers' window charged to one kernel cause (fixed time only); kernel stacks "
		"sampled every --sample-period NS of a thread's time (0: none)",
	.bpf = 1,
	.sample_period_ns = EXPLAIN_SAMPLE_PERIOD_NS,
	.check = explain_check,
	.attach = explain_attach,
	.window = explain_window,
	.emit = explain_emit,
	.detach = explain_bpf_stop,
};

/* ---- --explain-light: the same, with nothing run per system call or
 * fault; the samples split the time on a CPU (bpf/explain.h). */

static const struct run_part explain_light_part = {
	.name = "explain-light",
	.help = "as --explain, at a cost that does not grow with the system call or fault rate: the time on a CPU "
		"split by samples of the workers' CPUs, every --sample-period NS",
	.bpf = 1,
	.sample_period_ns = EXPLAIN_LIGHT_SAMPLE_PERIOD_NS,
	.check = explain_check,
	.attach = explain_light_attach,
	.window = explain_window,
	/* the warm-up's lock events weighed as the window opens; the
	 * programs' run time taken at its first and last sample */
	.sampled = explain_bpf_sampled,
	.emit = explain_emit,
	.detach = explain_bpf_stop,
};

/* ---- --completions: where the target's I/Os complete (bpf/blkio.h). */

static int completions_check(const struct run_config *cfg, char *why, size_t whylen)
{
	for (int k = 0; k < cfg->nchoices; k++)
		if (cfg->choices[k].probe->needs_target && cfg->target)
			return 0;
	snprintf(why, whylen, "--completions follows a target's I/Os: it needs an I/O probe and --target");
	return -1;
}

/* The device a block device is, or the one a file's filesystem is on. */
static int completions_attach(const struct run_view *v, char *why, size_t whylen)
{
	struct stat st;
	if (stat(v->cfg->target, &st) == 0)
		return blkio_bpf_start(S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev, why, whylen);
	snprintf(why, whylen, "%s: %s", v->cfg->target, strerror(errno));
	return -1;
}

/* The I/Os submitted in the window; with --ops (fixed work, no window of
 * time) every one to the end. */
static void completions_window(const struct run_view *v, uint64_t start_ns, uint64_t end_ns)
{
	blkio_bpf_window(start_ns, v->cfg->ops ? 0 : end_ns);
}

static void completions_emit(int rep, int measured)
{
	if (measured)
		blkio_bpf_emit(rep);
}

static const struct run_part completions_part = {
	.name = "completions",
	.help = "where the I/Os of an I/O probe's --target complete",
	.bpf = 1,
	.check = completions_check,
	.attach = completions_attach,
	.window = completions_window,
	.emit = completions_emit,
	.detach = blkio_bpf_stop,
};

/* ---- The table, in the order of their records. */

const struct run_part *const run_part_table[] = {&trace_part, &explain_part, &explain_light_part, &completions_part,
						 NULL};
#define NPARTS ((int)(sizeof run_part_table / sizeof run_part_table[0]) - 1)
_Static_assert(NPARTS <= RUN_MAX_PARTS, "run_config.parts has a bit per part");
static int attached[NPARTS];

int run_part_wanted(const struct run_config *cfg, const char *name)
{
	for (int k = 0; cfg->part_table && cfg->part_table[k]; k++)
		if (!strcmp(cfg->part_table[k]->name, name))
			return cfg->parts >> k & 1;
	return 0;
}

void run_parts_attach(const struct run_view *v)
{
	for (int k = 0; k < NPARTS; k++) {
		const struct run_part *p = run_part_table[k];
		char why[256] = "";
		if (!(v->cfg->parts >> k & 1)) /* its bit: main.c gave run_parse_args this table */
			continue;
		attached[k] = p->attach(v, why, sizeof why) == 0;
		if (attached[k])
			continue;
		if (p->unavailable) {
			p->unavailable(v->rep, why);
			continue;
		}
		struct json *j = json_record(p->name);
		json_int(j, "rep", v->rep);
		json_bool(j, "available", 0);
		json_str(j, "reason", why);
		json_emit(j);
	}
}

void run_parts_window(const struct run_view *v, uint64_t start_ns, uint64_t end_ns)
{
	for (int k = 0; k < NPARTS; k++)
		if (attached[k] && run_part_table[k]->window)
			run_part_table[k]->window(v, start_ns, end_ns);
}

void run_parts_sampled(int first, int last)
{
	for (int k = 0; k < NPARTS; k++)
		if (attached[k] && run_part_table[k]->sampled)
			run_part_table[k]->sampled(first, last);
}

/* The first streaming part waits; any other only drains what it has, so
 * that the master's sleep stays as long as it was asked to be. */
int run_parts_collect(int timeout_ms)
{
	int waited = 0;
	for (int k = 0; k < NPARTS; k++)
		if (attached[k] && run_part_table[k]->collect) {
			run_part_table[k]->collect(waited ? 0 : timeout_ms);
			waited = 1;
		}
	return waited;
}

void run_parts_finish(int rep, int measured)
{
	for (int k = 0; k < NPARTS; k++)
		if (attached[k]) {
			run_part_table[k]->emit(rep, measured);
			run_part_table[k]->detach();
			attached[k] = 0;
		}
}

void run_parts_detach(void)
{
	for (int k = 0; k < NPARTS; k++)
		if (attached[k]) {
			run_part_table[k]->detach();
			attached[k] = 0;
		}
}

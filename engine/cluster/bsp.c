/* `oslens-engine-mpi bsp`: the bulk-synchronous loop that checks the tail-
 * at-scale prediction. Every rank, pinned to one CPU, repeats: a fixed
 * amount of work calibrated to take S µs undisturbed, then a collective
 * (barrier, or an allreduce of one double). A detour taken during the work
 * lengthens that rank's step, and through the collective everyone's.
 *
 * The work is the detour probe's loop (read the clock, keep every gap over
 * the threshold), counted in iterations, not timed: a step with a detour
 * takes longer, as real computation would. Each step's work time, its wait
 * in the collective and its detours (CLOCK_MONOTONIC, as the kernel events
 * of --trace) are kept per rank and gathered to rank 0.
 *
 * Every `sync_every` steps the ranks drain their kernel events and agree
 * whether to stop (a signal, a failure): such steps carry bookkeeping and
 * are listed, so that the analysis can leave them out. */
#include "cluster.h"
#include "../args.h"
#include "../bpf/noise.h"
#include "../clock.h"
#include "../event_batch.h"
#include "../mem.h"
#include "../engine.h"
#include "../json.h"

#include <getopt.h>
#include <mpi.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

struct bsp_config {
	long compute_us, iterations, warmup, threshold_ns, sync_every, max_detours;
	int allreduce, trace;
};

static volatile sig_atomic_t got_signal;

static void on_signal(int sig)
{
	if (!got_signal)
		got_signal = sig;
}

static void parse(int argc, char **argv, struct bsp_config *c)
{
	static const struct option longopts[] = {{"compute-us", required_argument, 0, 'c'},
						 {"iterations", required_argument, 0, 'k'},
						 {"warmup-iterations", required_argument, 0, 'w'},
						 {"collective", required_argument, 0, 'C'},
						 {"threshold-ns", required_argument, 0, 't'},
						 {"sync-every", required_argument, 0, 's'},
						 {"max-detours", required_argument, 0, 'm'},
						 {"trace", no_argument, 0, 'T'},
						 {0, 0, 0, 0}};
	*c = (struct bsp_config){
		.compute_us = 1000, .iterations = 1000, .warmup = -1, .sync_every = 0, .max_detours = 1 << 20};
	optind = 2;
	opterr = 0;
	int o;
	while ((o = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (o) {
		case 'c': c->compute_us = parse_long("--compute-us", optarg, 1, 1000000); break;
		case 'k': c->iterations = parse_long("--iterations", optarg, 1, 10000000); break;
		case 'w': c->warmup = parse_long("--warmup-iterations", optarg, 0, 10000000); break;
		case 't': c->threshold_ns = parse_long("--threshold-ns", optarg, 1, 1000000000); break;
		case 's': c->sync_every = parse_long("--sync-every", optarg, 1, 10000000); break;
		case 'm': c->max_detours = parse_long("--max-detours", optarg, 16, 1 << 26); break;
		case 'T': c->trace = 1; break;
		case 'C':
			if (strcmp(optarg, "barrier") && strcmp(optarg, "allreduce"))
				die_usage("--collective: '%s' is neither barrier nor allreduce", optarg);
			c->allreduce = !strcmp(optarg, "allreduce");
			break;
		default: die_usage("bsp: unknown option or missing value: '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die_usage("bsp: unexpected argument '%s'", argv[optind]);
	if (c->warmup < 0) /* a tenth of the steps, at most a second's worth */
		c->warmup = c->iterations / 10 < 1000000 / c->compute_us ? c->iterations / 10 : 1000000 / c->compute_us;
	if (!c->sync_every) /* about every 100 ms */
		c->sync_every = 100000 / c->compute_us > 1 ? 100000 / c->compute_us : 1;
}

/* The loop's own time per iteration, from the fastest of many batches. */
static double loop_ns(void)
{
	uint64_t best = UINT64_MAX;
	for (int round = 0; round < 200; round++) {
		uint64_t a = mono_ns(), prev = a;
		for (int i = 0; i < 1000; i++)
			prev = mono_ns();
		if (prev - a < best)
			best = prev - a;
	}
	return (double)best / 1000;
}

struct steps {
	uint64_t *start, *work, *wait; /* per step: start offset, work time, wait in the collective */
	uint64_t (*detour)[2];	       /* [end, duration], CLOCK_MONOTONIC ns */
	uint64_t ndetours, cap, overflow;
	long *synced;
	long nsynced;
};

/* One step's work: `n` iterations of reading the clock; gaps over thr are
 * detours, kept when `keep` is set. */
static void work(uint64_t n, uint64_t thr, struct steps *s, int keep)
{
	uint64_t prev = mono_ns();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t now = mono_ns();
		if (__builtin_expect(now - prev > thr, 0) && keep) {
			if (s->ndetours < s->cap) {
				s->detour[s->ndetours][0] = now;
				s->detour[s->ndetours][1] = now - prev;
				s->ndetours++;
			} else {
				s->overflow++;
			}
		}
		prev = now;
	}
}

static void collective(int allreduce)
{
	if (allreduce) {
		double one = 1, sum;
		MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	} else {
		MPI_Barrier(MPI_COMM_WORLD);
	}
}

static void emit_u64s(struct json *j, const char *key, const uint64_t *v, long n)
{
	json_arr(j, key);
	for (long i = 0; i < n; i++)
		json_uint(j, NULL, v[i]);
	json_end(j);
}

int cmd_bsp(int argc, char **argv)
{
	struct bsp_config c;
	parse(argc, argv, &c);
	/* caught before the job is joined: a stop forwarded to a rank still
	 * joining (cluster_begin) must not kill it */
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	cluster_begin(&argc, &argv);

	/* One CPU per rank: the first of its share. */
	cpu_set_t set;
	int cpu = -1;
	if (sched_getaffinity(0, sizeof set, &set) == 0)
		for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
			if (CPU_ISSET(i, &set))
				cpu = i;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof set, &set);

	double lns = loop_ns();
	uint64_t thr = c.threshold_ns ? (uint64_t)c.threshold_ns : 20 * lns < 500 ? 500 : (uint64_t)(20 * lns);
	uint64_t n = (uint64_t)((double)c.compute_us * 1000 / lns);
	long k = c.iterations;
	struct steps s = {.cap = (uint64_t)c.max_detours};
	/* Never fault while measuring: each step's figures are stored between
	 * its end and the next step's start, where a fault would make this rank
	 * late unseen. */
	s.start = calloc_touched((size_t)k, sizeof *s.start);
	s.work = calloc_touched((size_t)k, sizeof *s.work);
	s.wait = calloc_touched((size_t)k, sizeof *s.wait);
	s.synced = calloc_touched((size_t)(k / c.sync_every + 2), sizeof *s.synced);
	s.detour = calloc_touched(s.cap, sizeof *s.detour);
	if (!s.start || !s.work || !s.wait || !s.synced || !s.detour)
		die_usage("bsp: out of memory for %ld steps", k);

	struct event_batch events = {0};
	int tracing = 0;
	if (c.trace) {
		char why[256] = "";
		int tid = (int)syscall(SYS_gettid);
		tracing = event_batch_start(&cpu, 1, &tid, 1, why, sizeof why) == 0;
	}

	int stop = 0;
	for (long i = 0; i < c.warmup && !stop; i++) {
		work(n, thr, &s, 0);
		collective(c.allreduce);
		if ((i + 1) % c.sync_every == 0)
			stop = cluster_agree(got_signal != 0);
	}
	stop = stop || cluster_agree(got_signal != 0);
	uint64_t t0 = mono_ns();
	long done = 0;
	while (done < k && !stop) {
		uint64_t a = mono_ns();
		work(n, thr, &s, 1);
		uint64_t b = mono_ns();
		collective(c.allreduce);
		uint64_t e = mono_ns();
		s.start[done] = a - t0;
		s.work[done] = b - a;
		s.wait[done] = e - b;
		done++;
		if (done % c.sync_every == 0 && done < k) {
			s.synced[s.nsynced++] = done; /* the next step starts after bookkeeping */
			if (tracing)
				noise_bpf_poll(event_batch_add, &events, 0);
			stop = cluster_agree(got_signal != 0);
		}
	}
	if (tracing)
		event_batch_finish(&events, 0);

	struct json *j = json_record("bsp");
	json_int(j, "cpu", cpu);
	json_str(j, "collective", c.allreduce ? "allreduce" : "barrier");
	json_int(j, "compute_us", c.compute_us);
	json_uint(j, "work_iterations", n);
	json_num(j, "loop_ns", lns);
	json_uint(j, "threshold_ns", thr);
	json_int(j, "warmup_iterations", c.warmup);
	json_int(j, "iterations", done);
	json_uint(j, "start_ns", t0);
	emit_u64s(j, "step_start_ns", s.start, done);
	emit_u64s(j, "work_ns", s.work, done);
	emit_u64s(j, "wait_ns", s.wait, done);
	json_arr(j, "synced");
	for (long i = 0; i < s.nsynced; i++)
		json_int(j, NULL, s.synced[i]);
	json_end(j);
	json_uint(j, "overflow", s.overflow);
	json_pairs(j, "detours", s.detour, s.ndetours);
	json_emit(j);

	/* Only a signal (to any rank) stops the loop early. */
	const char *status = stop ? "interrupted" : "ok";
	j = json_record("rep");
	json_int(j, "rep", 0);
	json_str(j, "status", status);
	json_emit(j);
	j = json_record("end");
	json_str(j, "status", status);
	if (got_signal)
		json_int(j, "signal", got_signal);
	json_emit(j);
	free(s.start);
	free(s.work);
	free(s.wait);
	free(s.synced);
	free(s.detour);
	return cluster_end(got_signal ? 128 + got_signal : stop ? EXIT_MEASURE_FAILED : 0);
}

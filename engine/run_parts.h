/* The attribution parts of `run`: what the master loads before it releases
 * the workers and unloads after, to say where their time went (--trace,
 * --explain, --completions; their kernel sides are in bpf/). Each is one
 * entry of the table in run_parts.c, which says all that the rest asks of
 * it: its option (run_args.c makes the long option, the bit in
 * run_config.parts and the dry run's key of it; main.c its line of the
 * usage text), whether it loads BPF programs, its checks, and the phases
 * that run.c calls once per repetition naming no part. A new attribution
 * is its loader and an entry, not edits in run_args.c, run.c or main.c. */
#ifndef OSLENS_RUN_PARTS_H
#define OSLENS_RUN_PARTS_H

#include "engine.h"

#include <stddef.h>
#include <stdint.h>

/* What a part sees of a repetition: its configuration and its workers,
 * ready at the barrier. Not the master: a part needs nothing else. */
struct run_view {
	const struct run_config *cfg;
	int rep;
	int nworkers;
	const int *cpus; /* per worker: the CPU it is pinned to */
	const int *pids; /* its process (thread mode: the one hosting them all) */
	const int *tids; /* its thread */
	/* The processes serving the workers, forked before the start (a
	 * two-task probe's partner), each with its worker's thread. */
	const int *helpers, *served;
	int nhelpers;
};

/* At most this many parts: the bits of run_config.parts. */
#define RUN_MAX_PARTS 32

/* One attribution. Only name, help, attach, emit and detach are required. */
struct run_part {
	/* Its option (--name, a flag), its key in the dry run's config, and
	 * the type of its record and of the one saying it is unavailable. */
	const char *name;
	const char *help; /* what it says of the run, for the usage text */
	/* It loads BPF programs of its own: a run asks for at most one such
	 * part, and run_args.c refuses two in one line naming them. */
	int bpf;
	/* It samples the threads on clocks whose period --sample-period sets
	 * (run_config.sample_period_ns, an option no other part takes), this
	 * period (ns) unless asked otherwise; 0: it samples nothing. The one
	 * place each default is stated: the usage text and `list` publish it. */
	int64_t sample_period_ns;
	/* Its constraints on the rest of the run, once argv is parsed and the
	 * probes and target checked: 0, or -1 with why (the one-line refusal). */
	int (*check)(const struct run_config *cfg, char *why, size_t whylen);
	/* Loads it for the workers of v: 0, or -1 with why (the reason its
	 * unavailable record gives; it then sits this repetition out). */
	int (*attach)(const struct run_view *v, char *why, size_t whylen);
	/* The record saying why it is unavailable, if not the common one,
	 * {type: name, rep, available: false, reason}. */
	void (*unavailable)(int rep, const char *why);
	/* The measured window, [start_ns, end_ns] of CLOCK_MONOTONIC (the BPF
	 * side's clock), given before the workers are released. */
	void (*window)(const struct run_view *v, uint64_t start_ns, uint64_t end_ns);
	/* The master took one of the window's samples (every --interval),
	 * the first as the window opens, the last as it closes. */
	void (*sampled)(int first, int last);
	/* Drains what it recorded so far, waiting up to timeout_ms for more:
	 * the master's sleep between samples, for parts that stream. */
	void (*collect)(int timeout_ms);
	/* Its records of repetition rep, once the window is over; measured:
	 * the repetition measured (failed or interrupted, a part's figures may
	 * mean nothing, and it writes nothing). */
	void (*emit)(int rep, int measured);
	/* Unloads; idempotent, and called on every path, emit or not. */
	void (*detach)(void);
};

/* The table, in the order of their records, ending with NULL: what
 * main.c gives run_parse_args (bit k of run_config.parts asks for its
 * part k) and lists in the usage text. */
extern const struct run_part *const run_part_table[];

/* Whether the run asks for the part named name. */
int run_part_wanted(const struct run_config *cfg, const char *name);

/* The phases, each over every part in table order (the order of their
 * records). Attaches those the run asks for, after the workers are ready. */
void run_parts_attach(const struct run_view *v);
/* Gives the measured window to every part attached. */
void run_parts_window(const struct run_view *v, uint64_t start_ns, uint64_t end_ns);
/* After each of the master's samples of the window; first, last: which. */
void run_parts_sampled(int first, int last);
/* The master's sleep of up to timeout_ms, taken by a streaming part if one
 * is attached (1), else left to the caller (0). */
int run_parts_collect(int timeout_ms);
/* Writes each attached part's records, then unloads it. */
void run_parts_finish(int rep, int measured);
/* Unloads whatever is still attached, writing nothing: every path. */
void run_parts_detach(void);

#endif

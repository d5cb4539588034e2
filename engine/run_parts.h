/* The attribution parts of `run`: what the master loads before it releases
 * the workers and unloads after, to say where their time went (--trace,
 * --explain, --completions; their kernel sides are in bpf/). Each is one
 * entry of the table in run_parts.c; run.c calls each phase below once per
 * repetition and names no part, so that a new attribution is a descriptor
 * and an entry, not edits in run.c. */
#ifndef OSLENS_RUN_PARTS_H
#define OSLENS_RUN_PARTS_H

#include "engine.h"

#include <stddef.h>

/* What a part sees of a repetition: its configuration and its workers,
 * ready at the barrier. Not the master: a part needs nothing else. */
struct run_view {
	const struct run_config *cfg;
	int rep;
	int nworkers;
	const int *cpus; /* per worker: the CPU it is pinned to */
	const int *pids; /* its process (thread mode: the one hosting them all) */
	const int *tids; /* its thread */
};

/* One attribution. Only wanted, attach, emit and detach are required. */
struct run_part {
	const char *name; /* the type of its record, and of the one saying it is unavailable */
	/* Whether the run asks for it. */
	int (*wanted)(const struct run_config *cfg);
	/* Loads it for the workers of v: 0, or -1 with why (the reason its
	 * unavailable record gives; it then sits this repetition out). */
	int (*attach)(const struct run_view *v, char *why, size_t whylen);
	/* The record saying why it is unavailable, if not the common one,
	 * {type: name, rep, available: false, reason}. */
	void (*unavailable)(int rep, const char *why);
	/* The measured window, [start_ns, end_ns] of CLOCK_MONOTONIC (the BPF
	 * side's clock), given before the workers are released. */
	void (*window)(const struct run_view *v, uint64_t start_ns, uint64_t end_ns);
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

/* The phases, each over every part in table order (the order of their
 * records). Attaches those the run asks for, after the workers are ready. */
void run_parts_attach(const struct run_view *v);
/* Gives the measured window to every part attached. */
void run_parts_window(const struct run_view *v, uint64_t start_ns, uint64_t end_ns);
/* The master's sleep of up to timeout_ms, taken by a streaming part if one
 * is attached (1), else left to the caller (0). */
int run_parts_collect(int timeout_ms);
/* Writes each attached part's records, then unloads it. */
void run_parts_finish(int rep, int measured);
/* Unloads whatever is still attached, writing nothing: every path. */
void run_parts_detach(void);

#endif

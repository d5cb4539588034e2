/* Kernel events (struct trace_event) into `events` records of at most
 * EVENT_BATCH events each, and the `trace` record that closes them: one
 * writer for `run --trace`, `trace` and `bsp --trace`. */
#ifndef OSLENS_EVENT_BATCH_H
#define OSLENS_EVENT_BATCH_H

#include "bpf/noise.h"

#define EVENT_BATCH 1000

struct event_batch {
	struct json *j; /* the record being filled, or NULL */
	int n;
};

/* Adds one event (a noise_bpf_poll callback: arg is the struct event_batch);
 * writes the record when it holds EVENT_BATCH events. */
void event_batch_add(const struct trace_event *e, void *arg);
/* Writes what the batch holds, if anything. */
void event_batch_flush(struct event_batch *b);
/* The `trace` record saying why nothing is recorded. */
void event_batch_unavailable(const char *why);
/* Starts recording (noise_bpf_start); where it cannot, writes the `trace`
 * record saying why (into why, too) and returns -1. */
int event_batch_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen);
/* Writes every event still recorded, then the `trace` record that says how
 * complete they were (and the signal that ended them, if any), and unloads
 * the programs. */
void event_batch_finish(struct event_batch *b, int signal);

#endif

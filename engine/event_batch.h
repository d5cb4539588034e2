/* Kernel events (struct trace_event) into `events` records of at most
 * EVENT_BATCH events each: one writer for `run --trace` and `trace`. */
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

#endif

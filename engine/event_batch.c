/* `events` records: see event_batch.h and engine/README.md. */
#include "event_batch.h"
#include "json.h"

#include <string.h>

void event_batch_flush(struct event_batch *b)
{
	if (!b->j)
		return;
	json_end(b->j);
	json_emit(b->j);
	b->j = NULL;
	b->n = 0;
}

void event_batch_add(const struct trace_event *e, void *arg)
{
	struct event_batch *b = arg;
	if (!b->j) {
		b->j = json_record("events");
		json_arr(b->j, "events");
	}
	/* the kernel fills name up to its size, without a NUL when it is full */
	char name[sizeof e->name + 1];
	memcpy(name, e->name, sizeof e->name);
	name[sizeof e->name] = 0;
	json_arr(b->j, NULL);
	json_uint(b->j, NULL, e->cpu);
	json_uint(b->j, NULL, e->start_ns);
	json_uint(b->j, NULL, e->end_ns);
	json_uint(b->j, NULL, e->kind);
	json_int(b->j, NULL, e->id);
	json_uint(b->j, NULL, e->flags);
	json_str(b->j, NULL, name);
	json_end(b->j);
	if (++b->n >= EVENT_BATCH)
		event_batch_flush(b);
}

void event_batch_unavailable(const char *why)
{
	struct json *j = json_record("trace");
	json_bool(j, "available", 0);
	json_str(j, "reason", why);
	json_emit(j);
}

int event_batch_start(const int *cpus, int ncpus, const int *tids, int ntids, char *why, size_t whylen)
{
	if (noise_bpf_start(cpus, ncpus, tids, ntids, why, whylen) == 0)
		return 0;
	event_batch_unavailable(why);
	return -1;
}

void event_batch_finish(struct event_batch *b, int signal)
{
	while (noise_bpf_poll(event_batch_add, b, 0) > 0)
		;
	event_batch_flush(b);
	struct json *j = json_record("trace");
	json_bool(j, "available", 1);
	json_uint(j, "lost", noise_bpf_lost());
	json_list(j, "missing", noise_bpf_missing());
	if (signal)
		json_int(j, "signal", signal);
	json_emit(j);
	noise_bpf_stop();
}

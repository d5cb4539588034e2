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

/* perf_event_open counters of a process tree, split by privilege level:
 * software events (all levels) and the hardware events a CPU may expose. */
#ifndef OSLENS_COUNTERS_H
#define OSLENS_COUNTERS_H

#include <sys/types.h>

/* Opens every counter on each of `tids` (inherited by the children they
 * create later). With `on_exec`, the counters start when the (single)
 * task execs; else they start now. A counter that cannot be opened is
 * remembered with the reason and reported as such. */
void counters_open(const pid_t *tids, int ntids, int on_exec);
/* Emits {"type":"counters","events":[...]} and closes them. */
void counters_emit_and_close(void);

#endif

/* partners.c: `run`'s master watches the workers' partner processes. */
#ifndef OSLENS_PARTNERS_H
#define OSLENS_PARTNERS_H

#include "run_shm.h"

struct partner_watch;
struct partner_watch *partners_new(int nworkers);
void partners_free(struct partner_watch *pw);
/* Forgets the pids of a repetition whose workers are gone. */
void partners_reset(struct partner_watch *pw);
/* Why a worker cannot go on (its partner died: the worker is killed, as
 * it would wait for ever), with *worker set; NULL if none. */
const char *partners_check(struct partner_watch *pw, struct shm *shm, int *worker);

#endif

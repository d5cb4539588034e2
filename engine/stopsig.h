/* The stop signals (SIGINT, SIGTERM, SIGHUP) as the engine's caller left
 * them. A program run under nohup starts with SIGHUP ignored, a background
 * job of a shell without job control with SIGINT ignored, and each is
 * expected to keep them so, and to hand them on so to what it runs. */
#ifndef OSLENS_STOPSIG_H
#define OSLENS_STOPSIG_H

#include <signal.h>

/* Notes which signals the caller ignored; first thing in main. */
void stopsig_note_inherited(void);

/* Installs `sa` for SIGINT and SIGTERM, and for SIGHUP unless the caller
 * ignored it. SIGINT is caught even then: it is how oslens asks an engine
 * to end its repetition. */
void stopsig_catch(const struct sigaction *sa);

/* In a child about to exec a user's command: every signal back to its
 * default, except those the caller ignored, which stay ignored. */
void stopsig_as_inherited(void);

#endif

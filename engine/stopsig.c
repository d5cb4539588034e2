#include "stopsig.h"

#include <stddef.h>

static sigset_t ignored_by_caller;

void stopsig_note_inherited(void)
{
	sigemptyset(&ignored_by_caller);
	for (int s = 1; s < NSIG; s++) {
		struct sigaction old;
		if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN)
			sigaddset(&ignored_by_caller, s);
	}
}

void stopsig_catch(const struct sigaction *sa)
{
	sigaction(SIGINT, sa, NULL);
	sigaction(SIGTERM, sa, NULL);
	if (!sigismember(&ignored_by_caller, SIGHUP))
		sigaction(SIGHUP, sa, NULL);
}

void stopsig_as_inherited(void)
{
	for (int s = 1; s < NSIG; s++) {
		struct sigaction sa = {.sa_handler = sigismember(&ignored_by_caller, s) == 1 ? SIG_IGN : SIG_DFL};
		sigemptyset(&sa.sa_mask);
		sigaction(s, &sa, NULL);
	}
}

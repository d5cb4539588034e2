/* oslens-guest, statically linked: the init of the KVM guests `--in kvm`
 * boots (agent.c; the kernel runs it as PID 1) and, on the host, the relay
 * that runs a command in such a guest (relay.c). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

int main(int argc, char **argv)
{
	if (getpid() == 1)
		return agent_main();
	if (argc >= 2 && !strcmp(argv[1], "relay"))
		return relay_main(argc, argv);
	fprintf(stderr, "usage: oslens-guest relay PORT KEYFILE PROGRAM [ARG...] (as PID 1: the guest's agent)\n");
	return 2;
}

/* The guest's wire: what `oslens-guest relay` on the host and the agent in
 * a KVM guest say to each other over one TCP connection (QEMU's user-mode
 * network forwards a host port to the agent's). Every message is a frame:
 * a type byte, a 32-bit little-endian length, that many bytes.
 *
 * host -> guest: ARGV once (NUL-separated arguments), then SIGNAL frames
 *                (the signal's number, 4 bytes) as the host's relay gets them;
 * guest -> host: STDOUT and STDERR data as it comes, then EXIT (4 bytes:
 *                the status, 128+N for a command killed by signal N).
 * A connection that closes early on the host side kills the command: an
 * engine never outlives the relay that started it. */
#ifndef OSLENS_GUEST_WIRE_H
#define OSLENS_GUEST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GUEST_PORT 5501 /* the agent's port inside the guest */
#define GUEST_MAX_FRAME (1u << 20)

enum frame_type {
	FRAME_ARGV = 'A',
	FRAME_SIGNAL = 'S',
	FRAME_STDOUT = 'O',
	FRAME_STDERR = 'E',
	FRAME_EXIT = 'X',
};

int frame_send(int fd, char type, const void *data, size_t len);
int frame_send_u32(int fd, char type, uint32_t value);
/* Reads one whole frame into buf (of GUEST_MAX_FRAME bytes); returns its
 * length, or -1 on end of stream or error. */
long frame_recv(int fd, char *type, char *buf);
uint32_t frame_u32(const char *buf);

int agent_main(void);
int relay_main(int argc, char **argv);

#endif

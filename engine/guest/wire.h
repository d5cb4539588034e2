/* The guest's wire: what `oslens-guest relay` on the host and the agent in
 * a KVM guest say to each other over one TCP connection (QEMU's user-mode
 * network forwards a host port to the agent's). Every message is a frame:
 * a type byte, a 32-bit little-endian length, that many bytes.
 *
 * host -> guest: KEY first (the host's half of the guest's key), then ARGV
 *                once (NUL-separated arguments), then SIGNAL frames (the
 *                signal's number, 4 bytes) as the host's relay gets them;
 * guest -> host: KEY (the guest's half: the agent is the guest's and not
 *                whoever else listens at the port), STDOUT and STDERR data
 *                as it comes, then EXIT (4 bytes: the status, 128+N for a
 *                command killed by signal N); or, for a connection whose
 *                first frame is not the host's half, REFUSED alone, and
 *                nothing is run.
 * The port QEMU forwards is open to every local user, so the key is what
 * tells oslens's relay from anyone else: two halves of GUEST_KEY_LEN random
 * bytes made for each guest, built into its initramfs and kept on the host
 * in a file only the user who made the guest can read (src/oslens/envs/kvm.py).
 * A connection that closes early on the host side kills the command: an
 * engine never outlives the relay that started it. */
#ifndef OSLENS_GUEST_WIRE_H
#define OSLENS_GUEST_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GUEST_PORT 5501 /* the agent's port inside the guest */
#define GUEST_MAX_FRAME (1u << 20)
/* The key file holds two halves of GUEST_KEY_LEN bytes, the host's then the
 * guest's; GUEST_KEY_FILE is its place in the initramfs (the agent unlinks it). */
#define GUEST_KEY_LEN 32
#define GUEST_KEY_FILE "/oslens/key"

enum frame_type {
	FRAME_KEY = 'K',
	FRAME_ARGV = 'A',
	FRAME_SIGNAL = 'S',
	FRAME_STDOUT = 'O',
	FRAME_STDERR = 'E',
	FRAME_EXIT = 'X',
	FRAME_REFUSED = 'R',
};

int frame_send(int fd, char type, const void *data, size_t len);
int frame_send_u32(int fd, char type, uint32_t value);
/* Reads one whole frame into buf (of GUEST_MAX_FRAME bytes); returns its
 * length, or -1 on end of stream or error. */
long frame_recv(int fd, char *type, char *buf);
/* The same for a frame of at most max bytes: -1, its data unread, for a
 * longer one. */
long frame_recv_at_most(int fd, char *type, char *buf, size_t max);
uint32_t frame_u32(const char *buf);
/* Two halves of a key (GUEST_KEY_LEN bytes) equal or not, in a time that
 * does not depend on where they differ. */
int same_key(const char *a, const char *b);

int agent_main(void);
int relay_main(int argc, char **argv);

#endif

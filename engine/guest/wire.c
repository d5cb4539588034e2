/* Frames on the guest's wire (wire.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "../json.h" /* write_all */
#include "wire.h"

static int read_all(int fd, char *buf, size_t len)
{
	while (len) {
		ssize_t n = read(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

int same_key(const char *a, const char *b)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < GUEST_KEY_LEN; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

uint32_t frame_u32(const char *buf)
{
	const unsigned char *p = (const unsigned char *)buf;
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int frame_send(int fd, char type, const void *data, size_t len)
{
	unsigned char head[5] = {(unsigned char)type};
	put_u32(head + 1, (uint32_t)len);
	if (write_all(fd, (const char *)head, sizeof head))
		return -1;
	return write_all(fd, data, len);
}

int frame_send_u32(int fd, char type, uint32_t value)
{
	unsigned char v[4];
	put_u32(v, value);
	return frame_send(fd, type, v, sizeof v);
}

long frame_recv(int fd, char *type, char *buf)
{
	return frame_recv_at_most(fd, type, buf, GUEST_MAX_FRAME);
}

long frame_recv_at_most(int fd, char *type, char *buf, size_t max)
{
	char head[5];
	if (read_all(fd, head, sizeof head))
		return -1;
	uint32_t len = frame_u32(head + 1);
	if (len > max)
		return -1;
	*type = head[0];
	if (read_all(fd, buf, len))
		return -1;
	return (long)len;
}

#include "textfile.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

char *read_text_file(const char *path, size_t reserve)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t len = reserve, cap = reserve + (1 << 14);
	char *buf = malloc(cap + 1);
	ssize_t n;
	while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
		len += (size_t)n;
		if (len == cap) {
			char *more = realloc(buf, cap * 2 + 1);
			if (!more)
				free(buf);
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	if (buf)
		buf[len] = 0;
	return buf;
}

#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define JSON_DEPTH 16

int json_output_lost;
int (*json_sink)(const char *buf, size_t len);

struct json {
	char *buf;
	size_t len, cap;
	int depth;
	int first[JSON_DEPTH];
	char close[JSON_DEPTH];
};

static void put(struct json *j, const char *s, size_t n)
{
	if (j->len + n + 1 > j->cap) {
		size_t cap = j->cap ? j->cap : 512;
		while (cap < j->len + n + 1)
			cap *= 2;
		char *b = realloc(j->buf, cap);
		if (!b)
			abort();
		j->buf = b;
		j->cap = cap;
	}
	memcpy(j->buf + j->len, s, n);
	j->len += n;
	j->buf[j->len] = 0;
}

static void putf(struct json *j, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	put(j, tmp, (size_t)n);
}

static void put_string(struct json *j, const char *s)
{
	put(j, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			char e[2] = {'\\', (char)c};
			put(j, e, 2);
		} else if (c < 0x20) {
			putf(j, "\\u%04x", c);
		} else {
			put(j, (const char *)&c, 1);
		}
	}
	put(j, "\"", 1);
}

static void key(struct json *j, const char *k)
{
	if (!j->first[j->depth])
		put(j, ",", 1);
	j->first[j->depth] = 0;
	if (k) {
		put_string(j, k);
		put(j, ":", 1);
	}
}

struct json *json_record(const char *type)
{
	struct json *j = calloc(1, sizeof *j);
	if (!j)
		abort();
	put(j, "{", 1);
	j->first[0] = 1;
	j->close[0] = '}';
	json_str(j, "type", type);
	return j;
}

void json_str(struct json *j, const char *k, const char *v)
{
	key(j, k);
	if (v)
		put_string(j, v);
	else
		put(j, "null", 4);
}

void json_int(struct json *j, const char *k, long long v)
{
	key(j, k);
	putf(j, "%lld", v);
}

void json_uint(struct json *j, const char *k, uint64_t v)
{
	key(j, k);
	putf(j, "%" PRIu64, v);
}

void json_num(struct json *j, const char *k, double v)
{
	key(j, k);
	if (isfinite(v))
		putf(j, "%.17g", v);
	else
		put(j, "null", 4);
}

void json_bool(struct json *j, const char *k, int v)
{
	key(j, k);
	put(j, v ? "true" : "false", v ? 4 : 5);
}

void json_null(struct json *j, const char *k)
{
	key(j, k);
	put(j, "null", 4);
}

static void open_(struct json *j, const char *k, char open, char close)
{
	key(j, k);
	put(j, &open, 1);
	if (++j->depth >= JSON_DEPTH)
		abort();
	j->first[j->depth] = 1;
	j->close[j->depth] = close;
}

void json_obj(struct json *j, const char *k)
{
	open_(j, k, '{', '}');
}
void json_arr(struct json *j, const char *k)
{
	open_(j, k, '[', ']');
}

void json_end(struct json *j)
{
	put(j, &j->close[j->depth], 1);
	j->depth--;
}

int write_all(int fd, const char *buf, size_t len)
{
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

int json_emit_fd(struct json *j, int fd)
{
	while (j->depth > 0)
		json_end(j);
	put(j, "}\n", 2);
	int rc = write_all(fd, j->buf, j->len);
	free(j->buf);
	free(j);
	return rc;
}

void json_emit(struct json *j)
{
	/* The reader went away: the master stops the run and cleans up. */
	while (j->depth > 0)
		json_end(j);
	put(j, "}\n", 2);
	if (json_write(j->buf, j->len) != 0)
		json_output_lost = 1;
	free(j->buf);
	free(j);
}

int json_write(const char *buf, size_t len)
{
	return json_sink ? json_sink(buf, len) : write_all(STDOUT_FILENO, buf, len);
}

void json_list(struct json *j, const char *key, const char *list)
{
	json_arr(j, key);
	for (const char *p = list ? list : ""; *p;) {
		size_t n = strcspn(p, ",");
		if (n) {
			char item[256];
			snprintf(item, sizeof item, "%.*s", (int)n, p);
			json_str(j, NULL, item);
		}
		p += n + (p[n] == ',');
	}
	json_end(j);
}

void json_pairs(struct json *j, const char *key, const uint64_t (*pairs)[2], size_t n)
{
	json_arr(j, key);
	for (size_t i = 0; i < n; i++) {
		json_arr(j, NULL);
		json_uint(j, NULL, pairs[i][0]);
		json_uint(j, NULL, pairs[i][1]);
		json_end(j);
	}
	json_end(j);
}

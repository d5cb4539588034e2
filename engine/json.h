/* A JSON-lines writer: each record is built in memory and written with one
 * write(2), so records never interleave and a reader sees whole lines. */
#ifndef OSLENS_JSON_H
#define OSLENS_JSON_H

#include <stddef.h>
#include <stdint.h>

struct json;

extern int json_output_lost; /* stdout is gone (EPIPE): stop measuring */

struct json *json_record(const char *type); /* starts {"type": ...} */
void json_str(struct json *j, const char *key, const char *val);
void json_int(struct json *j, const char *key, long long val);
void json_uint(struct json *j, const char *key, uint64_t val);
void json_num(struct json *j, const char *key, double val);
void json_bool(struct json *j, const char *key, int val);
void json_null(struct json *j, const char *key);
void json_obj(struct json *j, const char *key); /* key NULL inside arrays */
void json_arr(struct json *j, const char *key);
/* An array of the items of a comma-separated list ("a,b" -> ["a", "b"]). */
void json_list(struct json *j, const char *key, const char *list);
/* An array of n pairs ([[a, b], ...]): the (start, end) intervals and
 * timestamped records the engine keeps in uint64_t[2] arrays. */
void json_pairs(struct json *j, const char *key, const uint64_t (*pairs)[2], size_t n);
void json_end(struct json *j); /* closes the last obj/arr */
/* Where records go: stdout, unless a rank of an MPI job (cluster/
 * cluster_mpi.c) holds them for rank 0 to gather. json_write sends whole
 * records already written (a worker's results file) the same way. */
extern int (*json_sink)(const char *buf, size_t len);
int json_write(const char *buf, size_t len);
void json_emit(struct json *j);		  /* closes, writes to stdout, frees */
int json_emit_fd(struct json *j, int fd); /* the same to fd; -1 on error */
int write_all(int fd, const char *buf, size_t len);

#endif

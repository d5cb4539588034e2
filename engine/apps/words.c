/* The text apps' words: see words.h. */
#include "words.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- the text apps' words */

/* 2^(i/256) in 32.32 fixed point, i = 0..256: with linear interpolation
 * between entries (relative error < 1e-6) it draws Zipf ranks in integers
 * only, so the text is the same whatever libm or CPU computes it. */
static uint64_t exp2_q32[257];

/* In integers, without libm (the engine links none, so that a worker's image
 * is as small as a plain C program's): x = 2^(i/256) in 2.62 fixed point,
 * times 2^(1/256) per step; the error of 256 steps stays far below the
 * 2^-32 the table keeps. */
static void exp2_table_init(void)
{
	const unsigned __int128 step = 4624189567668517720ull; /* 2^(1/256) in 2.62 */
	uint64_t x = 1ull << 62;
	for (int i = 0; i <= 256; i++) {
		exp2_q32[i] = (x + (1ull << 29)) >> 30; /* 2.62 -> 32.32, rounded */
		x = (uint64_t)((x * step + (1ull << 61)) >> 62);
	}
}

/* A rank in [0, VOCAB_WORDS) with probability about 1/(rank+1) (Zipf, s =
 * 1): rank + 1 = (V+1)^u = 2^(u log2(V+1)) for u uniform in [0, 1). */
static inline uint32_t zipf_rank(uint32_t random)
{
	const uint64_t log2_v = 71337924599ull; /* log2(VOCAB_WORDS + 1) in 32.32 */
	uint64_t t = (uint64_t)((unsigned __int128)random * log2_v >> 32);
	unsigned whole = t >> 32, i = (t >> 24) & 255;
	uint64_t rest = t & 0xffffff;
	uint64_t m = exp2_q32[i] + ((exp2_q32[i + 1] - exp2_q32[i]) * rest >> 24);
	uint64_t r = ((m << whole) >> 32) - 1;
	return r < VOCAB_WORDS ? (uint32_t)r : VOCAB_WORDS - 1;
}

int vocab_init(struct vocab *v)
{
	v->text = malloc((size_t)VOCAB_WORDS * 13);
	v->off = malloc(VOCAB_WORDS * sizeof *v->off);
	v->len = malloc(VOCAB_WORDS);
	if (!v->text || !v->off || !v->len) {
		vocab_free(v);
		return -1;
	}
	if (!exp2_q32[0])
		exp2_table_init();
	size_t at = 0;
	for (uint32_t r = 0; r < VOCAB_WORDS; r++) {
		uint64_t x = app_mix64(0x766f636162ull + r); /* a few collide: harmless */
		unsigned len = 4 + x % 8;		     /* 4..11 letters */
		x = app_mix64(x);
		v->off[r] = at;
		v->len[r] = len;
		for (unsigned k = 0; k < len; k++) {
			if (k % 12 == 11)
				x = app_mix64(x);
			v->text[at++] = 'a' + (x >> (5 * (k % 12))) % 26;
		}
		v->text[at++] = 0;
	}
	return 0;
}

void vocab_free(struct vocab *v)
{
	free(v->text);
	free(v->off);
	free(v->len);
	*v = (struct vocab){0};
}

size_t vocab_text(const struct vocab *v, uint64_t *rng, char *buf, size_t bytes, uint64_t words)
{
	size_t at = 0;
	for (uint64_t i = 0; i < words; i++) {
		uint64_t x = app_mix64((*rng)++);
		uint32_t r = zipf_rank((uint32_t)(x >> 32));
		size_t len = v->len[r];
		if (at + len + 1 > bytes)
			break;
		memcpy(buf + at, v->text + v->off[r], len);
		at += len;
		buf[at++] = (x & 15) == 0 ? '\n' : ' ';
	}
	return at;
}

/* -------------------------------------------------- the word-count table */

static inline uint64_t word_hash(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static inline size_t word_bucket(const struct wordtab *t, uint64_t h)
{
	return (h ^ (h >> 29)) & (t->nbuckets - 1);
}

int wordtab_init(struct wordtab *t)
{
	*t = (struct wordtab){.nbuckets = 1024};
	t->bucket = calloc(t->nbuckets, sizeof *t->bucket);
	return t->bucket ? 0 : -1;
}

void wordtab_free(struct wordtab *t)
{
	for (size_t b = 0; b < t->nbuckets && t->bucket; b++)
		for (struct word *w = t->bucket[b], *next; w; w = next) {
			next = w->next;
			free(w);
		}
	free(t->bucket);
	*t = (struct wordtab){0};
}

static int wordtab_grow(struct wordtab *t)
{
	size_t n = t->nbuckets * 2;
	struct word **nb = calloc(n, sizeof *nb);
	if (!nb)
		return -1;
	struct wordtab bigger = {.bucket = nb, .nbuckets = n};
	for (size_t b = 0; b < t->nbuckets; b++)
		for (struct word *w = t->bucket[b], *next; w; w = next) {
			next = w->next;
			size_t k = word_bucket(&bigger, w->hash);
			w->next = nb[k];
			nb[k] = w;
		}
	free(t->bucket);
	t->bucket = nb;
	t->nbuckets = n;
	return 0;
}

/* The node of word p[0..len), made (one malloc) if it is new. */
static struct word *wordtab_get(struct wordtab *t, const char *p, size_t len, uint64_t h)
{
	struct word **head = &t->bucket[word_bucket(t, h)];
	for (struct word *w = *head; w; w = w->next)
		if (w->hash == h && w->len == len && !memcmp(w->text, p, len))
			return w;
	struct word *w = malloc(sizeof *w + len + 1);
	if (!w)
		return NULL;
	*w = (struct word){.next = *head, .hash = h, .len = len};
	memcpy(w->text, p, len);
	w->text[len] = 0;
	*head = w;
	if (++t->nwords > t->nbuckets && wordtab_grow(t) != 0)
		return NULL;
	return w;
}

int wordtab_scan(struct wordtab *t, const char *p, size_t len, uint32_t doc)
{
	size_t i = 0;
	for (;;) {
		while (i < len && (unsigned char)(p[i] - 'a') >= 26)
			i++;
		if (i == len)
			return 0;
		size_t start = i;
		uint64_t h = 0xcbf29ce484222325ull;
		while (i < len && (unsigned char)(p[i] - 'a') < 26)
			h = (h ^ (unsigned char)p[i++]) * 0x100000001b3ull;
		struct word *w = wordtab_get(t, p + start, i - start, h);
		if (!w)
			return -1;
		w->count++;
		if (w->last_doc != doc + 1) {
			w->last_doc = doc + 1;
			w->docs++;
		}
		t->total++;
	}
}

/* As bytes: u64 total, u64 nwords, then per word u32 len, u32 docs, u64 count, text. */
int wordtab_put(const struct wordtab *t, struct app_buf *out)
{
	uint64_t head[2] = {t->total, t->nwords};
	if (app_buf_put(out, head, sizeof head) != 0)
		return -1;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (const struct word *w = t->bucket[b]; w; w = w->next) {
			struct {
				uint32_t len, docs;
				uint64_t count;
			} rec = {w->len, w->docs, w->count};
			if (app_buf_put(out, &rec, sizeof rec) != 0 || app_buf_put(out, w->text, w->len) != 0)
				return -1;
		}
	return 0;
}

int wordtab_merge(struct wordtab *t, const struct app_buf *part)
{
	const char *p = part->data, *end = part->data + part->len;
	uint64_t head[2];
	if (part->len < sizeof head)
		return -1;
	memcpy(head, p, sizeof head);
	p += sizeof head;
	for (uint64_t i = 0; i < head[1]; i++) {
		struct {
			uint32_t len, docs;
			uint64_t count;
		} rec;
		if ((size_t)(end - p) < sizeof rec)
			return -1;
		memcpy(&rec, p, sizeof rec);
		p += sizeof rec;
		if ((size_t)(end - p) < rec.len)
			return -1;
		struct word *w = wordtab_get(t, p, rec.len, word_hash(p, rec.len));
		if (!w)
			return -1;
		w->count += rec.count;
		w->docs += rec.docs;
		p += rec.len;
	}
	t->total += head[0];
	return p == end ? 0 : -1;
}

uint64_t wordtab_checksum(const struct wordtab *t, int with_docs)
{
	uint64_t sum = 0;
	for (size_t b = 0; b < t->nbuckets; b++)
		for (const struct word *w = t->bucket[b]; w; w = w->next)
			sum += app_mix64(w->hash ^ app_mix64(w->count + (with_docs ? (uint64_t)w->docs << 40 : 0)));
	return app_mix64(sum ^ app_mix64(t->total) ^ ((uint64_t)t->nwords << 32));
}

#define LONGEST_WORD 12 /* with its separator */

long vocab_chunk(const struct vocab *v, uint64_t seed, long words, int c, char **buf, size_t *cap, long *nwords)
{
	long begin, end;
	app_share(words, TEXT_CHUNKS, c, &begin, &end);
	size_t need = (size_t)(end - begin) * LONGEST_WORD + 1;
	if (need > *cap) {
		char *more = realloc(*buf, need);
		if (!more)
			return -1;
		*buf = more;
		*cap = need;
	}
	uint64_t rng = seed + (uint64_t)c * 0x9e3779b97f4a7c15ull;
	*nwords = end - begin;
	return (long)vocab_text(v, &rng, *buf, *cap, (uint64_t)(end - begin));
}

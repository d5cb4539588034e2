/* The words of the text apps (wordcount, psearchy): a fixed Zipf-like
 * vocabulary, text drawn from it, and the word-count table PHOENIX's
 * word_count keeps. Shared by both apps, registered by neither. */
#ifndef OSLENS_WORDS_H
#define OSLENS_WORDS_H

#include "app.h"

/* A fixed vocabulary of VOCAB_WORDS lower-case words, drawn Zipf-like
 * (rank r with probability about 1/r, as words in real text). */
#define VOCAB_WORDS 100000
struct vocab {
	char *text;    /* the words, each NUL-terminated */
	uint32_t *off; /* word r starts at text + off[r] */
	uint8_t *len;
};
int vocab_init(struct vocab *v);
void vocab_free(struct vocab *v);
/* Appends words drawn with generator state *rng to buf (a space after each,
 * a newline after some) until it holds at least `bytes` bytes or `words`
 * words, whichever comes first; returns the bytes written. */
size_t vocab_text(const struct vocab *v, uint64_t *rng, char *buf, size_t bytes, uint64_t words);

/* The text apps' text: `words` words in TEXT_CHUNKS fixed chunks, chunk c
 * drawn from a generator seeded by (seed, c), so that it is the same however
 * the chunks are shared among workers. Writes chunk c into *buf (grown as
 * needed, *cap its size) and returns its words in *nwords; its length in
 * bytes, or -1 when out of memory. */
#define TEXT_CHUNKS 1024
long vocab_chunk(const struct vocab *v, uint64_t seed, long words, int c, char **buf, size_t *cap, long *nwords);

/* A word-count table as PHOENIX word_count keeps it: chained hashing, one
 * malloc'd node per distinct word, doubling as it grows. */
struct word {
	struct word *next;
	uint64_t hash;
	uint64_t count;	   /* occurrences */
	uint32_t docs;	   /* documents it occurs in */
	uint32_t last_doc; /* internal: the last document counted, + 1 */
	uint32_t len;
	char text[];
};
struct wordtab {
	struct word **bucket;
	size_t nbuckets, nwords;
	uint64_t total; /* words counted */
};
int wordtab_init(struct wordtab *t);
void wordtab_free(struct wordtab *t);
/* Counts the words (runs of a-z) of p[0..len) as occurring in document doc. */
int wordtab_scan(struct wordtab *t, const char *p, size_t len, uint32_t doc);
/* A partial table, as bytes, and back: counts and documents are added. */
int wordtab_put(const struct wordtab *t, struct app_buf *out);
int wordtab_merge(struct wordtab *t, const struct app_buf *part);
/* Independent of the order the words were counted and merged in; the
 * document counts only where documents are never split between workers. */
uint64_t wordtab_checksum(const struct wordtab *t, int with_docs);

#endif

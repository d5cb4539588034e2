/* Small kernel-made text files (procfs, sysfs, tracefs) read whole: their
 * size is unknown until read (stat says 0), so the buffer grows. */
#ifndef OSLENS_TEXTFILE_H
#define OSLENS_TEXTFILE_H

#include <stddef.h>

/* The file's text, NUL-terminated, with `reserve` bytes free before it (a
 * caller may prepend); NULL if it cannot be read. Free the result. */
char *read_text_file(const char *path, size_t reserve);

#endif

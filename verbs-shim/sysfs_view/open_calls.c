/* The libc functions that open a path, moved into the sysfs view (interpose.h). */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>

#include "verbs-shim/sysfs_view/interpose.h"

/* open's mode argument, which is there only when the flags create a file. */
#define READ_MODE(flags, mode)                                            \
  do {                                                                    \
    if (((flags) & O_CREAT) != 0 || ((flags) & O_TMPFILE) == O_TMPFILE) { \
      va_list ap;                                                         \
      va_start(ap, flags);                                                \
      (mode) = va_arg(ap, mode_t);                                        \
      va_end(ap);                                                         \
    }                                                                     \
  } while (0)

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);
typedef int (*open_2_fn)(const char *, int);
typedef int (*openat_2_fn)(int, const char *, int);
typedef FILE *(*fopen_fn)(const char *, const char *);
typedef DIR *(*opendir_fn)(const char *);

SOFTRDMA_INTERPOSE int open(const char *path, int flags, ...) {
  static void *next;
  char buf[PATH_MAX];
  mode_t mode = 0;
  READ_MODE(flags, mode);
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "open", NULL, open_fn)(path, flags, mode);
}

SOFTRDMA_INTERPOSE int open64(const char *path, int flags, ...) {
  static void *next;
  char buf[PATH_MAX];
  mode_t mode = 0;
  READ_MODE(flags, mode);
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "open64", NULL, open_fn)(path, flags, mode);
}

SOFTRDMA_INTERPOSE int openat(int dirfd, const char *path, int flags, ...) {
  static void *next;
  char buf[PATH_MAX];
  mode_t mode = 0;
  READ_MODE(flags, mode);
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "openat", NULL, openat_fn)(dirfd, path, flags, mode);
}

SOFTRDMA_INTERPOSE int openat64(int dirfd, const char *path, int flags, ...) {
  static void *next;
  char buf[PATH_MAX];
  mode_t mode = 0;
  READ_MODE(flags, mode);
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "openat64", NULL, openat_fn)(dirfd, path, flags, mode);
}

/* The checked entry points _FORTIFY_SOURCE builds call. */
SOFTRDMA_INTERPOSE int __open_2(const char *path, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__open_2", NULL, open_2_fn)(path, flags);
}

SOFTRDMA_INTERPOSE int __open64_2(const char *path, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__open64_2", NULL, open_2_fn)(path, flags);
}

SOFTRDMA_INTERPOSE int __openat_2(int dirfd, const char *path, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__openat_2", NULL, openat_2_fn)(dirfd, path, flags);
}

SOFTRDMA_INTERPOSE int __openat64_2(int dirfd, const char *path, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__openat64_2", NULL, openat_2_fn)(dirfd, path, flags);
}

/* libc's own open inside these is not interposable. */
SOFTRDMA_INTERPOSE FILE *fopen(const char *path, const char *mode) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return NULL;
  return NEXT(next, "fopen", NULL, fopen_fn)(path, mode);
}

SOFTRDMA_INTERPOSE FILE *fopen64(const char *path, const char *mode) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return NULL;
  return NEXT(next, "fopen64", NULL, fopen_fn)(path, mode);
}

SOFTRDMA_INTERPOSE DIR *opendir(const char *path) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return NULL;
  return NEXT(next, "opendir", NULL, opendir_fn)(path);
}

/* The libc functions that ask about a path without opening it, moved into the sysfs view
 * (interpose.h): the stat family, including the __xstat entry points of binaries built
 * before glibc 2.33, access, readlink and the extended attributes (`ls -l` asks for them). */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "verbs-shim/sysfs_view/interpose.h"

/* The versions x86-64 glibc gives the stat entry points of binaries built before 2.33. */
#define XSTAT_VERSION "GLIBC_2.2.5"
#define FXSTATAT_VERSION "GLIBC_2.4"

typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*stat64_fn)(const char *, struct stat64 *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*fstatat64_fn)(int, const char *, struct stat64 *, int);
typedef int (*statx_fn)(int, const char *, int, unsigned, struct statx *);
typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*xstat64_fn)(int, const char *, struct stat64 *);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
typedef int (*fxstatat64_fn)(int, int, const char *, struct stat64 *, int);
typedef int (*access_fn)(const char *, int);
typedef int (*faccessat_fn)(int, const char *, int, int);
typedef ssize_t (*readlink_fn)(const char *, char *, size_t);
typedef ssize_t (*readlinkat_fn)(int, const char *, char *, size_t);
typedef ssize_t (*getxattr_fn)(const char *, const char *, void *, size_t);
typedef ssize_t (*listxattr_fn)(const char *, char *, size_t);

SOFTRDMA_INTERPOSE int stat(const char *path, struct stat *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "stat", NULL, stat_fn)(path, st);
}

SOFTRDMA_INTERPOSE int stat64(const char *path, struct stat64 *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "stat64", NULL, stat64_fn)(path, st);
}

SOFTRDMA_INTERPOSE int lstat(const char *path, struct stat *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "lstat", NULL, stat_fn)(path, st);
}

SOFTRDMA_INTERPOSE int lstat64(const char *path, struct stat64 *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "lstat64", NULL, stat64_fn)(path, st);
}

SOFTRDMA_INTERPOSE int fstatat(int dirfd, const char *path, struct stat *st, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "fstatat", NULL, fstatat_fn)(dirfd, path, st, flags);
}

SOFTRDMA_INTERPOSE int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "fstatat64", NULL, fstatat64_fn)(dirfd, path, st, flags);
}

SOFTRDMA_INTERPOSE int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "statx", NULL, statx_fn)(dirfd, path, flags, mask, st);
}

SOFTRDMA_INTERPOSE int __xstat(int ver, const char *path, struct stat *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__xstat", XSTAT_VERSION, xstat_fn)(ver, path, st);
}

SOFTRDMA_INTERPOSE int __xstat64(int ver, const char *path, struct stat64 *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__xstat64", XSTAT_VERSION, xstat64_fn)(ver, path, st);
}

SOFTRDMA_INTERPOSE int __lxstat(int ver, const char *path, struct stat *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__lxstat", XSTAT_VERSION, xstat_fn)(ver, path, st);
}

SOFTRDMA_INTERPOSE int __lxstat64(int ver, const char *path, struct stat64 *st) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__lxstat64", XSTAT_VERSION, xstat64_fn)(ver, path, st);
}

SOFTRDMA_INTERPOSE int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__fxstatat", FXSTATAT_VERSION, fxstatat_fn)(ver, dirfd, path, st, flags);
}

SOFTRDMA_INTERPOSE int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "__fxstatat64", FXSTATAT_VERSION, fxstatat64_fn)(ver, dirfd, path, st, flags);
}

SOFTRDMA_INTERPOSE int access(const char *path, int mode) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "access", NULL, access_fn)(path, mode);
}

SOFTRDMA_INTERPOSE int faccessat(int dirfd, const char *path, int mode, int flags) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "faccessat", NULL, faccessat_fn)(dirfd, path, mode, flags);
}

SOFTRDMA_INTERPOSE ssize_t readlink(const char *path, char *out, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "readlink", NULL, readlink_fn)(path, out, size);
}

SOFTRDMA_INTERPOSE ssize_t readlinkat(int dirfd, const char *path, char *out, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "readlinkat", NULL, readlinkat_fn)(dirfd, path, out, size);
}

SOFTRDMA_INTERPOSE ssize_t getxattr(const char *path, const char *name, void *value, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "getxattr", NULL, getxattr_fn)(path, name, value, size);
}

SOFTRDMA_INTERPOSE ssize_t lgetxattr(const char *path, const char *name, void *value, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "lgetxattr", NULL, getxattr_fn)(path, name, value, size);
}

SOFTRDMA_INTERPOSE ssize_t listxattr(const char *path, char *list, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "listxattr", NULL, listxattr_fn)(path, list, size);
}

SOFTRDMA_INTERPOSE ssize_t llistxattr(const char *path, char *list, size_t size) {
  static void *next;
  char buf[PATH_MAX];
  if ((path = softrdma_view_path(path, buf)) == NULL) return -1;
  return NEXT(next, "llistxattr", NULL, listxattr_fn)(path, list, size);
}

/* What each interposed libc function (open_calls.c, query_calls.c) shares: the path moved
 * into the view (view_path.h), then the next definition of the function, libc's. */
#pragma once

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "verbs-shim/sysfs_view/view_path.h"

#define SOFTRDMA_INTERPOSE __attribute__((visibility("default")))

/* The definition of NAME after this library's (VERSION pins a compat symbol; NULL: the
 * default one), looked up once and kept in *SLOT. */
static inline void *softrdma_next(void **slot, const char *name, const char *version) {
  void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (f == NULL) {
    f = version != NULL ? dlvsym(RTLD_NEXT, name, version) : dlsym(RTLD_NEXT, name);
    if (f == NULL) { /* no C library lacks these; going on would jump to address 0 */
      fprintf(stderr, "libsoftrdma_sysfs.so: no %s after this library\n", name);
      abort();
    }
    __atomic_store_n(slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

/* NAME's next definition as a TYPE function pointer (ISO C has no object-to-function pointer
 * cast; POSIX guarantees dlsym's works). */
#define NEXT(slot, name, version, type) (__extension__(type) softrdma_next(&(slot), name, version))

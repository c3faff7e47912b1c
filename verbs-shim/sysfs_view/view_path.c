#include "verbs-shim/sysfs_view/view_path.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char *skip_slashes(const char *p) {
  while (*p == '/') ++p;
  return p;
}

/* Past the component NAME at P, or NULL when P's first component is not NAME. */
static const char *past(const char *p, const char *name) {
  const size_t n = strlen(name);
  return strncmp(p, name, n) == 0 && (p[n] == '/' || p[n] == '\0') ? p + n : NULL;
}

/* Appends N bytes of S to OUT, which holds *LEN of PATH_MAX, leaving room for the terminator;
 * 0 when they do not fit. */
static int append(char *out, size_t *len, const char *s, size_t n) {
  if (n >= PATH_MAX - *len) return 0;
  memcpy(out + *len, s, n);
  *len += n;
  return 1;
}

static const char *too_long(void) {
  errno = ENAMETOOLONG;
  return NULL;
}

const char *softrdma_view_path(const char *path, char *out) {
  if (path == NULL || path[0] != '/') return path;
  const char *p = past(skip_slashes(path), "sys");
  if (p != NULL) p = past(skip_slashes(p), "class");
  const char *class_name = p != NULL ? skip_slashes(p) : NULL;
  const char *rest = class_name != NULL ? past(class_name, "infiniband") : NULL;
  if (class_name != NULL && rest == NULL) rest = past(class_name, "infiniband_verbs");
  if (rest == NULL) return path;
  const char *root = getenv(SOFTRDMA_SYSFS_ROOT_VARIABLE);
  if (root == NULL || *root == '\0') return path;

  size_t len = 0;
  if (!append(out, &len, root, strlen(root)) || !append(out, &len, "/class/", 7) ||
      !append(out, &len, class_name, (size_t)(rest - class_name))) {
    return too_long();
  }
  const size_t base = len; /* the class directory: a ".." here leaves the view */
  int keep_slash = 0;      /* a path ending in '/', "." or ".." names a directory */
  for (const char *c = skip_slashes(rest); *c != '\0'; c = skip_slashes(c)) {
    const size_t n = strcspn(c, "/");
    const int dot = n == 1 && c[0] == '.';
    const int dot_dot = n == 2 && c[0] == '.' && c[1] == '.';
    if (dot_dot) {
      if (len == base) return path;
      do { /* drops the last component and its slash */
        --len;
      } while (out[len] != '/');
    } else if (!dot && (!append(out, &len, "/", 1) || !append(out, &len, c, n))) {
      return too_long();
    }
    c += n;
    keep_slash = dot || dot_dot || *c == '/';
  }
  if (keep_slash && !append(out, &len, "/", 1)) return too_long();
  out[len] = '\0';
  return out;
}

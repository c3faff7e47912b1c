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

/* The directory of the view PATH is in: "class/" for /sys/class/infiniband(_verbs), "dev/" for
 * /dev/infiniband, with *NAME at that directory's name in PATH and *REST just past it; NULL
 * when PATH is outside the view. */
static const char *view_dir(const char *path, const char **name, const char **rest) {
  const char *p = skip_slashes(path);
  const char *sys = past(p, "sys");
  const char *class_dir = sys != NULL ? past(skip_slashes(sys), "class") : NULL;
  if (class_dir != NULL) {
    *name = skip_slashes(class_dir);
    *rest = past(*name, "infiniband");
    if (*rest == NULL) *rest = past(*name, "infiniband_verbs");
    return *rest != NULL ? "/class/" : NULL;
  }
  const char *dev = past(p, "dev");
  if (dev == NULL) return NULL;
  *name = skip_slashes(dev);
  *rest = past(*name, "infiniband");
  return *rest != NULL ? "/dev/" : NULL;
}

const char *softrdma_view_path(const char *path, char *out) {
  if (path == NULL || path[0] != '/') return path;
  const char *name = NULL, *rest = NULL;
  const char *dir = view_dir(path, &name, &rest);
  if (dir == NULL) return path;
  const char *root = getenv(SOFTRDMA_SYSFS_ROOT_VARIABLE);
  if (root == NULL || *root == '\0') return path;

  size_t len = 0;
  if (!append(out, &len, root, strlen(root)) || !append(out, &len, dir, strlen(dir)) ||
      !append(out, &len, name, (size_t)(rest - name))) {
    return too_long();
  }
  const size_t base = len; /* the view's directory: a ".." here leaves the view */
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

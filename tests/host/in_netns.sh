#!/bin/sh
# Runs a command in a network namespace of its own: the loopback interface up, with two IPv6
# addresses besides ::1 (one host has one IPv6 loopback address, and a test of two hosts needs
# two). Nothing outside the namespace sees its traffic or addresses. Exits 77, which ctest
# counts as a skip, where the namespace cannot be made (no root and no user namespaces, no
# iproute2, IPv6 disabled).
#   in_netns.sh PROGRAM ARGS...
set -u
if ! unshare --net --map-root-user true 2>/dev/null; then
  echo "SKIPPED: cannot create a network namespace here (needs root or unprivileged user namespaces)"
  exit 77
fi
if ! command -v ip >/dev/null; then
  echo "SKIPPED: the ip command (iproute2) is missing"
  exit 77
fi
exec unshare --net --map-root-user sh -c '
  if ! { ip link set lo up &&
         ip -6 addr add fd53:7264:6d61::1/128 dev lo nodad &&
         ip -6 addr add fd53:7264:6d61::2/128 dev lo nodad; }; then
    echo "SKIPPED: cannot set up the loopback interface of the namespace (is IPv6 disabled?)"
    exit 77
  fi
  exec "$@"' in_netns "$@"

#!/usr/bin/env bash
# The main job: an unmodified RDMA program, ibv_rc_pingpong from Debian's ibverbs-utils, runs
# as a server and a client on this machine over softrdma, with no RDMA NIC, no kernel module
# and no flags beyond what its manual shows. Each process's device takes the first free
# 127.0.0.N:4791, so the server's GID is ::ffff:127.0.0.1 and the client's ::ffff:127.0.0.2
# (unless something else holds them); the two exchange real RoCEv2 packets over UDP.
# `-c` makes both sides check every byte they receive.
# Usage: scripts/demo.sh [extra ibv_rc_pingpong flags, e.g. -s 65536 -n 100]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >/dev/null
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release --target softrdma softrdma_verbs >/dev/null
softrdma=build/release/tools/softrdma/softrdma

# A free TCP port for the pingpong's own connection exchange (its default is 18515).
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
server_out=$(mktemp)
trap 'rm -f "$server_out"' EXIT

echo "\$ softrdma run -- ibv_rc_pingpong -d srdma0 -g 0 -c -p $port $*    (server)"
timeout 60 "$softrdma" run -- ibv_rc_pingpong -d srdma0 -g 0 -c -p "$port" "$@" >"$server_out" 2>&1 &
server=$!
# The client starts once the server listens (its device is up by then). Connecting to find
# out would use up the server's one accept(), so the kernel's socket table is read instead.
listening() { awk -v p="$(printf ':%04X' "$port")" '$4 == "0A" && substr($2, length($2) - 4) == p' /proc/net/tcp /proc/net/tcp6 | grep -q .; }
for _ in $(seq 100); do
  listening && break
  sleep 0.1
done
echo "\$ softrdma run -- ibv_rc_pingpong -d srdma0 -g 0 -c -p $port $* 127.0.0.1    (client)"
client_status=0
timeout 60 "$softrdma" run -- ibv_rc_pingpong -d srdma0 -g 0 -c -p "$port" "$@" 127.0.0.1 || client_status=$?
server_status=0
wait "$server" || server_status=$?
echo "--- server:"
cat "$server_out"
if [ "$client_status" -ne 0 ] || [ "$server_status" -ne 0 ]; then
  echo "demo failed: client exit $client_status, server exit $server_status" >&2
  exit 1
fi

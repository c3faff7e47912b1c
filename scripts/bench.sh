#!/usr/bin/env bash
# softrdma's benchmark suite (issue 7): unmodified perftest over softrdma against the kernel's
# TCP/UDP baselines on the same path, in one invocation. Not part of scripts/test.sh.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

usage() {
  cat <<EOF
usage: scripts/bench.sh [--reps N] [--full | --smoke] [--netns | --no-netns] [--veth-mtu BYTES]
                        [--out DIR] [--softrdma PATH] [--udp-pingpong PATH] [--idle-seconds S]
                        [--only WORD]

Runs, interleaved so that machine drift hits both sides alike (per repetition: ours, then the
baseline; the medians of N repetitions are reported):
  perftest over softrdma   ib_write_bw, ib_read_bw, ib_send_bw at 2 B, 64 B, 1 KiB, 4 KiB,
                           64 KiB, 1 MiB (--full: every power of two from 2 B to 1 MiB);
                           ib_send_lat, ib_write_lat, ib_read_lat at 2 B, 4 KiB, 64 KiB;
                           ibv_rc_pingpong and ibv_rc_pingpong -e at 2 B, 4 KiB;
                           ib_write_bw -q 1, 16, 256 at 64 KiB;
                           ib_write_bw -R 64 KiB on srdmaiw0 (iWARP, softrdma run --iwarp)
  same-shape baselines     udp_pingpong (tests/bench): a UDP ping-pong whose ends busy-poll
                           (against send_lat one way, read_lat and rc_pingpong a round trip)
                           or sleep in recv (write_lat one way, rc_pingpong -e a round trip),
                           and a busy-polling UDP stream beside the bandwidth rows
  kernel baselines         qperf tcp_bw (same message size), sockperf UDP ping-pong (send_lat)
                           and throughput (64 B message rate), qperf udp_lat (write_lat),
                           qperf tcp_lat x 2 (read_lat, a round trip), iperf3 -P 1/16/128 (-q)
Each latency row also gives perftest's t_avg against its t_typical (target <= 1.5).
on loopback and, with --netns (the default where 'ip netns' works), between two network
namespaces joined by a veth (10.78.0.1 and 10.78.0.2, MTU --veth-mtu, default 1500) that this
script creates and always removes. Also: CPU seconds per GB moved (ib_write_bw 64 KiB against
qperf tcp_bw 64 KiB, both ends' processes) and the idle CPU and VmRSS of a softrdma device with
no traffic (an ibv_rc_pingpong server waiting --idle-seconds, default 10).

Prints one table (ours, the baseline, the ratio, the issue's target, met or not) and writes
table.txt, results.csv, bench.png (gnuplot) and logs/ into --out (default
build/bench/<UTC timestamp>). A default run takes about 11 minutes on a busy 2-core machine.

  --reps N          repetitions per row (default 3)
  --full            every power-of-two message size in the bandwidth sweep
  --smoke           one tiny repetition of ib_write_bw 64 KiB (RoCE and iWARP) against qperf
                    tcp_bw, and of ib_send_lat and ibv_rc_pingpong 2 B against the busy-poll
                    UDP ping-pong, on loopback, and a 2 s idle sample: checks the suite still
                    works (< 20 s)
  --softrdma PATH   the softrdma executable (default: build/release, then build/h-bench)
  --udp-pingpong PATH  the udp_pingpong baseline (default: tests/bench/ of softrdma's build)
  --only WORD       only the groups of rows whose name holds WORD: bandwidth, latency, queue,
                    CPU, iWARP (and the idle sample unless --idle-seconds 0); no plot
Exit status: 0 when every figure was measured, 1 when some program failed (its row says n/a
and the logs say why), 2 for a usage error or a missing tool.
EOF
}

die() { echo "bench.sh: $*" >&2; exit 2; }

reps=3 mode="" netns="auto" veth_mtu=1500 out="" softrdma="" idle=10 udp_pp="" only=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --reps) [ $# -ge 2 ] || die "--reps needs a number"; reps="$2"; shift ;;
    --full) mode="--full" ;;
    --smoke) mode="--smoke" ;;
    --netns) netns="yes" ;;
    --no-netns) netns="no" ;;
    --veth-mtu) [ $# -ge 2 ] || die "--veth-mtu needs a size"; veth_mtu="$2"; shift ;;
    --out) [ $# -ge 2 ] || die "--out needs a folder"; out="$2"; shift ;;
    --softrdma) [ $# -ge 2 ] || die "--softrdma needs a path"; softrdma="$2"; shift ;;
    --udp-pingpong) [ $# -ge 2 ] || die "--udp-pingpong needs a path"; udp_pp="$2"; shift ;;
    --only) [ $# -ge 2 ] || die "--only needs a word"; only=(--only "$2"); shift ;;
    --idle-seconds) [ $# -ge 2 ] || die "--idle-seconds needs a number"; idle="$2"; shift ;;
    *) die "unknown option '$1' (--help lists them)" ;;
  esac
  shift
done
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer, not '$reps'"
[[ "$veth_mtu" =~ ^[0-9]+$ ]] || die "--veth-mtu must be a number of bytes, not '$veth_mtu'"
[[ "$idle" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--idle-seconds must be a number, not '$idle'"
if [ "$mode" = "--smoke" ]; then reps=1 netns="no" idle=2; fi

if [ -z "$softrdma" ]; then
  for dir in build/release build/h-bench; do
    [ -x "$here/$dir/tools/softrdma/softrdma" ] && { softrdma="$here/$dir/tools/softrdma/softrdma"; break; }
  done
  [ -n "$softrdma" ] || die "no softrdma build found; build Release first: cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build/release --target softrdma softrdma_verbs"
fi
[ -x "$softrdma" ] || die "$softrdma is not an executable"
udp_pp="${udp_pp:-$(dirname "$softrdma")/../../tests/bench/udp_pingpong}"
[ -x "$udp_pp" ] || die "no udp_pingpong at $udp_pp; build it: cmake --build BUILD --target udp_pingpong"

for tool in ib_write_bw ib_read_bw ib_send_bw ib_send_lat ib_write_lat ib_read_lat ibv_rc_pingpong qperf sockperf \
            iperf3 gnuplot; do
  command -v "$tool" >/dev/null || die "$tool is not installed (scripts/install-deps.sh installs it)"
done

# Two hosts: namespaces A (servers) and B (clients) joined by a veth. 10.78.0.x is used only
# inside them; the names carry this script's PID so that parallel runs never collide.
ns_a="srbench-a-$$" ns_b="srbench-b-$$" veth_a="srbA$$" veth_b="srbB$$"
addr_a="10.78.0.1" addr_b="10.78.0.2"
made_netns=""
cleanup() {
  if [ -n "$made_netns" ]; then
    ip netns del "$ns_a" 2>/dev/null || true  # deleting a namespace deletes its veth end, and so the pair
    ip netns del "$ns_b" 2>/dev/null || true
  fi
}
runner=""
trap cleanup EXIT
# bash runs a trap only once its foreground child ends: the runner goes in the background and
# is waited for, so that an interrupt ends it (and, through their parent-death signal, its
# programs) at once and the namespaces go with them.
trap '[ -z "$runner" ] || kill "$runner" 2>/dev/null; exit 130' INT TERM

paths="loop"
if [ "$netns" != "no" ]; then
  if ip netns add "$ns_a" 2>/dev/null; then
    made_netns=1
    ip netns add "$ns_b"
    ip link add "$veth_a" mtu "$veth_mtu" netns "$ns_a" type veth peer name "$veth_b" mtu "$veth_mtu" netns "$ns_b"
    ip -n "$ns_a" addr add "$addr_a/24" dev "$veth_a"
    ip -n "$ns_b" addr add "$addr_b/24" dev "$veth_b"
    for ns in "$ns_a" "$ns_b"; do
      ip -n "$ns" link set lo up
    done
    ip -n "$ns_a" link set "$veth_a" up
    ip -n "$ns_b" link set "$veth_b" up
    paths="loop,veth"
  elif [ "$netns" = "yes" ]; then
    die "cannot create a network namespace ('ip netns add' needs root)"
  else
    echo "bench.sh: no network namespaces here ('ip netns add' failed): loopback only" >&2
  fi
fi

out="${out:-$here/build/bench/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
read -r load_start _ < /proc/loadavg
start=$(date +%s)
{
  echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'), $(uname -r)"
  echo "softrdma: $softrdma ($(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown))"
  echo "paths: $paths; repetitions: $reps; veth MTU: $veth_mtu"
  echo "load average (1 min) at start: $load_start"
} | tee "$out/run.txt"

status=0
/usr/bin/python3 "$here/tests/bench/bench_suite.py" "$softrdma" "$out" --reps "$reps" $mode --paths "$paths" \
  --netns "$ns_a" "$ns_b" --addrs "$addr_a" "$addr_b" --idle-seconds "$idle" --udp-pingpong "$udp_pp" \
  "${only[@]}" &
runner=$!
wait "$runner" || status=$?
runner=""
[ "$status" -le 1 ] || die "the runner failed (exit $status)"

read -r load_end _ < /proc/loadavg
echo "load average (1 min) at end: $load_end; run took $(( $(date +%s) - start )) s" | tee -a "$out/run.txt"
lat=1; [ "$mode" != "--smoke" ] || lat=0
# A partial run (--only) lacks one of the plot's panels: no plot.
[ ${#only[@]} -gt 0 ] || gnuplot -e "dir='$out'; paths='${paths//,/ }'; lat=$lat; title='softrdma perftest vs kernel baselines ($(nproc) cores, load $load_start-$load_end)'" \
  "$here/tests/bench/bench_plot.gp" || { echo "bench.sh: gnuplot failed" >&2; status=1; }
echo "results: $out/table.txt, $out/results.csv, $out/bench.png"
exit "$status"

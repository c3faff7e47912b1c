#!/bin/sh
# Runs a verbs_echo server and client on this machine, each under `softrdma run` (so each gets
# its own software RDMA device on a 127.0.0.N address), and fails unless both exit 0.
#
# usage: run_pair.sh --softrdma PATH --program PATH --port PORT [--timeout SECONDS]
#                    [--server-faults PLAN] [--client-faults PLAN]
#                    [--server-stats FILE] [--client-stats FILE] [-- PROGRAM_ARGS...]
#
# PROGRAM_ARGS go to both sides, after --server/--client and --port PORT. Each side is killed
# after --timeout seconds (default 45), so a hang fails the test instead of stalling CI.
set -u

softrdma='' program='' port='' timeout=45
server_faults='' client_faults='' server_stats='' client_stats=''

fail() {
  echo "run_pair: FAIL: $*" >&2
  exit 1
}

while [ $# -gt 0 ]; do
  case $1 in
    --) shift; break ;;
    --softrdma | --program | --port | --timeout | --server-faults | --client-faults | --server-stats | --client-stats)
      [ $# -ge 2 ] || { echo "run_pair: $1 needs a value" >&2; exit 2; }
      case $1 in
        --softrdma) softrdma=$2 ;;
        --program) program=$2 ;;
        --port) port=$2 ;;
        --timeout) timeout=$2 ;;
        --server-faults) server_faults=$2 ;;
        --client-faults) client_faults=$2 ;;
        --server-stats) server_stats=$2 ;;
        --client-stats) client_stats=$2 ;;
      esac
      shift 2 ;;
    *) echo "run_pair: unknown option '$1'" >&2; exit 2 ;;
  esac
done
if [ -z "$softrdma" ] || [ -z "$program" ] || [ -z "$port" ]; then
  echo "usage: run_pair.sh --softrdma PATH --program PATH --port PORT [options] [-- PROGRAM_ARGS...]" >&2
  exit 2
fi

# run_side ROLE FAULTS STATS PROGRAM_ARGS...: replaces the (sub)shell with one side, built up
# in "$@" so that paths with spaces survive.
run_side() {
  side=$1 faults=$2 stats=$3
  shift 3
  set -- -- "$program" "--$side" --port "$port" "$@"
  [ -z "$stats" ] || set -- --stats "$stats" "$@"
  [ -z "$faults" ] || set -- --faults "$faults" "$@"
  # timeout sends TERM at the limit, and KILL 5 s later if that was not enough.
  exec timeout -k 5 "$timeout" "$softrdma" run "$@"
}

describe() { # describe STATUS: what an exit status means
  case $1 in
    0) echo "passed" ;;
    124 | 137) echo "timed out after ${timeout} s" ;;
    *) echo "exited $1" ;;
  esac
}

workdir=$(mktemp -d) || fail "cannot create a temporary folder"
server_log=$workdir/server.log
server_pid=''
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

# A stats file left by an earlier run must not stand in for this one's.
for file in "$server_stats" "$client_stats"; do
  [ -z "$file" ] || rm -f "$file"
done

(run_side server "$server_faults" "$server_stats" "$@") >"$server_log" 2>&1 &
server_pid=$!

# verbs_echo prints "listening on" once its TCP port accepts connections.
tries=0
until grep -q 'listening on' "$server_log"; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$server_log"
    wait "$server_pid"
    fail "the server $(describe $?) before it listened"
  fi
  tries=$((tries + 1))
  [ "$tries" -le 200 ] || { cat "$server_log"; fail "the server did not listen within 20 s"; }
  sleep 0.1
done

(run_side client "$client_faults" "$client_stats" "$@")
client_status=$?

# A failed client will not finish the exchange, so do not wait for the server's own timeout.
[ "$client_status" -eq 0 ] || kill "$server_pid" 2>/dev/null
wait "$server_pid" 2>/dev/null # quiet: dash would print "Terminated" for our own TERM
server_status=$?
if [ "$client_status" -ne 0 ] && [ "$server_status" -eq 143 ]; then
  server_result="stopped after the client failed" # our TERM, not a failure of its own
else
  server_result=$(describe "$server_status")
fi
server_pid=''
cat "$server_log"

if [ "$client_status" -ne 0 ] || [ "$server_result" != passed ]; then
  fail "client $(describe "$client_status"), server $server_result"
fi
echo "run_pair: PASS: client and server both exited 0"

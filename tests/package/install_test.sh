#!/usr/bin/env bash
# Builds softrdma's Debian package in the build folder BUILD (scripts/package.sh), installs it on
# this machine and proves that the installed files
# alone work: README's pingpong pair, the man pages, softrdmad started with its unit's command
# line (the unit itself started where systemd runs, checked by systemd-analyze where it does
# not), the machine-wide switch (every program loads softrdma's libraries while it is on), and
# the example project built and tested against the package. Then it purges the package with the
# switch on and checks that none of its files, and not the switch, is left. Needs root (dpkg).
#
# usage: tests/package/install_test.sh BUILD
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
build=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "install_test: needs root to install a package (dpkg)" >&2; exit 2; }

work=$(mktemp -d)
daemon_pid=""
switch=/etc/ld.so.conf.d/00-softrdma.conf
cleanup() {
  [ -z "$daemon_pid" ] || kill "$daemon_pid" 2>/dev/null || true
  dpkg --purge softrdma >/dev/null 2>&1 || true
  if [ -L "$switch" ]; then rm -f "$switch" && ldconfig; fi
  rm -rf "$work" /run/softrdma
}
trap cleanup EXIT
fail() { echo "install_test: FAIL: $*" >&2; exit 1; }
pass() { echo "install_test: ok: $*"; }

# Nothing of the build tree may be reached: a clean PATH, another folder, no softrdma variables.
installed() { (cd "$work" && env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$work" "$@"); }

package_file() {
  "$source_dir/scripts/package.sh" "$build" >"$work/package.log" 2>&1 || { cat "$work/package.log"; fail "scripts/package.sh"; }
  tail -n 1 "$work/package.log"
}

install_package() {
  dpkg-query -W softrdma >/dev/null 2>&1 && fail "softrdma is already installed; purge it first"
  apt-get install -y -q --no-install-recommends "$1" >"$work/apt.log" 2>&1 || { cat "$work/apt.log"; fail "apt-get install $1"; }
  dpkg-query -L softrdma | while read -r f; do [ -d "$f" ] || echo "$f"; done >"$work/files"
  pass "installed $(basename "$1"): $(wc -l <"$work/files") files"
}

check_devices_from_install() {
  local out
  out=$(installed softrdma devices) || fail "softrdma devices"
  grep -q "^srdma0" <<<"$out" || fail "softrdma devices lists no srdma0: $out"
  grep -q "library: /usr/lib/.*/softrdma/libibverbs.so.1" <<<"$out" || fail "softrdma devices does not use the installed library: $out"
  pass "softrdma devices: srdma0 from $(grep -o '/usr/lib/[^ ]*' <<<"$out")"
}

check_man_pages() {
  installed man -w softrdma >/dev/null || fail "no man page softrdma(1)"
  installed man -w 8 softrdmad >/dev/null || fail "no man page softrdmad(8)"
  installed man 1 softrdma 2>/dev/null | grep -q "SOFTRDMA RUN" || fail "softrdma(1) lacks the run command's reference"
  pass "man pages softrdma(1) and softrdmad(8)"
}

# README's first pair: ibv_rc_pingpong with -c, each side checking every byte it receives.
# ARGS go to `softrdma run` on both sides.
pingpong_pair() {
  local port=$1 name=$2; shift 2
  installed timeout 60 softrdma run "$@" -- ibv_rc_pingpong -g 0 -c -p "$port" -n 100 >"$work/$name.server" 2>&1 &
  local server=$!
  sleep 1
  installed timeout 60 softrdma run "$@" -- ibv_rc_pingpong -g 0 -c -p "$port" -n 100 127.0.0.1 >"$work/$name.client" 2>&1 \
    || { cat "$work/$name.client" "$work/$name.server"; fail "$name: client"; }
  wait "$server" || { cat "$work/$name.server"; fail "$name: server"; }
  grep -q "100 iters" "$work/$name.client" || fail "$name: client did not finish 100 iterations"
  pass "$name: ibv_rc_pingpong -c -n 100 pair"
}

# The unit's ExecStart, with its line continuations joined.
unit_command() {
  sed -e ':a' -e '/\\$/N; s/\\\n//; ta' /usr/lib/systemd/system/softrdmad.service \
    | sed -n 's/^ExecStart=//p'
}

check_daemon_unit() {
  if [ -d /run/systemd/system ]; then
    systemctl start softrdmad.service || fail "systemctl start softrdmad"
  else
    systemd-analyze verify /usr/lib/systemd/system/softrdmad.service || fail "systemd-analyze verify"
    pass "systemd-analyze verify softrdmad.service (systemd is not running here)"
    getent group softrdma >/dev/null || fail "the package created no group softrdma"
    # What RuntimeDirectory= and Group= would do, then the unit's own command line.
    install -d -m 0750 -g softrdma /run/softrdma
    local -a command
    read -r -a command <<<"$(unit_command)"
    setsid "${command[@]}" >"$work/softrdmad.log" 2>&1 &
    daemon_pid=$!
  fi
  local i
  for i in $(seq 50); do [ -S /run/softrdma/softrdmad.sock ] && break; sleep 0.1; done
  [ -S /run/softrdma/softrdmad.sock ] || { cat "$work/softrdmad.log" 2>/dev/null; fail "softrdmad made no socket"; }
  [ "$(stat -c %G:%a /run/softrdma/softrdmad.sock)" = softrdma:660 ] || fail "socket is $(stat -c %G:%a /run/softrdma/softrdmad.sock), not softrdma:660"
  pingpong_pair 18751 daemon_pair --daemon=/run/softrdma/softrdmad.sock
  if [ -d /run/systemd/system ]; then
    systemctl stop softrdmad.service || fail "systemctl stop softrdmad"
  else
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || { cat "$work/softrdmad.log"; fail "softrdmad did not exit 0 on SIGTERM"; }
    daemon_pid=""
  fi
  pass "softrdmad from its unit's command line served a pair, then exited 0 on SIGTERM"
}

check_example() {
  cp -r "$source_dir/examples/verbs-ci" "$work/example"
  installed cmake -S "$work/example" -B "$work/example/build" >"$work/example.log" 2>&1 \
    && installed cmake --build "$work/example/build" >>"$work/example.log" 2>&1 \
    && installed ctest --test-dir "$work/example/build" --output-on-failure >>"$work/example.log" 2>&1 \
    || { cat "$work/example.log"; fail "examples/verbs-ci against the installed package"; }
  pass "examples/verbs-ci: $(grep -o '[0-9]*% tests passed.*' "$work/example.log")"
}

# The folder the loader gives programs for libibverbs.so.1 (its first entry in ld.so.cache).
# awk reads to the end: leaving early would kill ldconfig with SIGPIPE, which pipefail reports.
loader_folder() {
  local file
  file=$(ldconfig -p | awk '$1 == "libibverbs.so.1" && $NF ~ /^\// && !found {print $NF; found = 1}')
  [ -z "$file" ] || dirname "$file"
}

set_switch() { # on | off, as docs/packaging.md says to
  if [ "$1" = on ]; then ln -s /usr/share/softrdma/00-softrdma.conf "$switch"; else rm -f "$switch"; fi
  ldconfig
}

check_machine_wide_switch() {
  [ ! -e "$switch" ] || fail "$switch exists before the test"
  set_switch on
  local folder out
  folder=$(loader_folder)
  [ "$folder" = "$(cat /usr/share/softrdma/00-softrdma.conf)" ] || fail "switch on: the loader gives libibverbs.so.1 from '$folder'"
  out=$(installed ibv_devices 2>&1) || fail "switch on: ibv_devices: $out"
  grep -q "srdma0" <<<"$out" || fail "switch on: ibv_devices without softrdma run lists no srdma0: $out"
  set_switch off
  [ "$(loader_folder)" != "$folder" ] || fail "switch off: the loader still gives softrdma's library"
  out=$(installed ibv_devices 2>&1) || true
  ! grep -q "srdma0" <<<"$out" || fail "switch off: ibv_devices still lists srdma0"
  pass "machine-wide switch: ibv_devices lists srdma0 without softrdma run while it is on, not after"
}

purge_and_check() {
  set_switch on  # the owner's switch, left on: the purge must take it away
  local ours
  ours=$(cat /usr/share/softrdma/00-softrdma.conf)
  dpkg --purge softrdma >"$work/purge.log" 2>&1 || { cat "$work/purge.log"; fail "dpkg --purge"; }
  local left
  left=$(while read -r f; do [ ! -e "$f" ] || echo "$f"; done <"$work/files")
  [ -z "$left" ] || fail "left after purge: $left"
  [ ! -L "$switch" ] || fail "the purge left the machine-wide switch $switch"
  [ "$(loader_folder)" != "$ours" ] || fail "after the purge the loader still names softrdma's folder"
  pass "purged: none of the package's files, and not the switch, is left"
}

deb=$(package_file)
install_package "$deb"
check_devices_from_install
check_man_pages
pingpong_pair 18750 embedded_pair
check_daemon_unit
check_machine_wide_switch
check_example
purge_and_check

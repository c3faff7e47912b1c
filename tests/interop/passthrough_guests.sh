#!/bin/bash
# passthrough_guests.sh - softrdma's libibverbs.so.1 in a machine that has kernel RDMA devices:
# the library lists the machine's own devices (rdma-core loaded with dlmopen) beside srdma0 and
# forwards every verb on them. Runs in the two QEMU guests of
# SOFTRDMA_SHARED_DIR/tools/interop-vm/rxe-guest.sh (guest A: rxe0 on eth0 10.99.0.2, siw0 on
# eth1 10.99.1.2; guest B: 10.99.0.3 / 10.99.1.3), whose rdma-core userspace is the host's.
#
# Staging: softrdma's library folder (libibverbs.so.1, librdmacm.so.1, libsoftrdma_sysfs.so)
# goes to /share/softrdma/lib in the guests (the host's $RXE_WORK/run/share over virtio-9p), the
# softrdma tool to /share/softrdma/bin, and every shared library they need that the guest root
# lacks (ldd on the host; the guests' libc is the host's) to /share/softrdma/deps, which comes
# AFTER the library folder on LD_LIBRARY_PATH. rdma-core's own libibverbs/librdmacm are never
# copied. deps also holds a symlink ld-linux-x86-64.so.2 -> /lib64/ld-linux-x86-64.so.2: the
# namespace's libc.so.6 finds the loader by name, and the guest root, unlike an installed
# system, has it only in /usr/lib64 and no ld.so.cache.
#
# Every program runs under softrdma's libraries in one of two ways (--launch, both by default):
#   run  LD_LIBRARY_PATH=deps SOFTRDMA_LIB_DIR=/share/softrdma/lib softrdma run -- PROGRAM
#        (the tool in the guest; SOFTRDMA_LIB_DIR because the build-tree path it looks in,
#        ../../lib from its own folder, is not the staged layout; adds the sysfs view)
#   env  LD_LIBRARY_PATH=/share/softrdma/lib:deps PROGRAM (the library alone, no sysfs view)
# SOFTRDMA_REAL_DEVICES=after is set for every case but the placement cases.
# Each program runs with LD_DEBUG=files, and the log must show softrdma's libibverbs.so.1
# initialised (and, for rxe0/siw0, rdma-core's in link-map namespace [1]).
#
# srdma0 cannot bind UDP 4791 in a guest's own network namespace (rdma_rxe binds 0.0.0.0:4791),
# so its cases run in a fresh one (`unshare -n`, lo up), where 127.0.0.N is free; the kernel's
# devices are visible there too (rdma's shared netns mode). All traffic stays inside the guests
# and the namespace rxe-guest.sh creates.
#
# Cases (LAUNCH.NAME; a and d in guest A, b c e between the guests, B the server):
#   stage          the staged tool and library resolve every library in the guest (ld.so --list)
#   a.after        ibv_devices in a fresh netns: srdma0 rxe0 siw0, in this order
#   a.hide         SOFTRDMA_REAL_DEVICES=hide: srdma0 only
#   a.first        (env only) the variable unset, the library's default: rxe0 siw0 srdma0
#   a.rootns       outside the netns: srdma0 absent with one stderr line, rxe0 siw0 listed
#   b.rc_pingpong  ibv_rc_pingpong -d rxe0 -g GIDX -c (buffers checked), B server, A client to 10.99.0.3
#   c.write_bw     ib_write_bw -d rxe0 -x GIDX the same way
#   d.srdma0_pair  ibv_rc_pingpong -d srdma0 server and client in one netns of guest A
#   e.rping        rping -s / rping -c -a 10.99.0.3 -C 5 -v over rxe0 (librdmacm passthrough)
#   e.rping_siw    the same over siw0 (10.99.1.3): iWARP through the kernel's rdma_cm
#   e.ucmatose     ucmatose / ucmatose -s 10.99.0.3: the server listens on the wildcard, which
#                  goes to the kernel's rdma_cm (srdma0 cannot start in the guest's namespace)
#   e.send_bw_R    ib_send_bw -R -d rxe0: perftest connected by rdma_cm
#   f.pyverbs      rdma-core's Python suite, core category, on rxe0 in guest A: the same outcome
#                  (ok/skipped/FAIL/ERROR) per test as on rdma-core alone (see case_pyverbs)
# Results: OUT/results.md (case, launch, expected, result, detail) and per case the guests'
# stdout/stderr/LD_DEBUG logs in OUT/LAUNCH (OUT/plain: the Python suite on rdma-core alone).
#
# Skips (exit 77, one line) when not root, without QEMU or rxe-guest.sh, or when the guest image
# cannot be built or the guests cannot boot.
set -uo pipefail

SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SELF_DIR/../.." && pwd)
SHARED=${SOFTRDMA_SHARED_DIR:-$REPO/../shared}
SOFTRDMA=$REPO/build/tools/softrdma/softrdma
LIB_DIR=
OUT=
ONLY=.
LAUNCH=run,env
KEEP_UP=0

usage() {
	cat <<-EOF
	usage: passthrough_guests.sh [--softrdma PATH] [--lib-dir DIR] [--out DIR] [--only REGEX]
	                             [--launch run,env] [--keep-up]
	Runs RDMA programs under softrdma's libibverbs.so.1 / librdmacm.so.1 in two QEMU guests that
	have kernel rxe0 and siw0, and checks that the library lists and drives them beside srdma0.
	  --softrdma PATH  the softrdma tool (default $REPO/build/tools/softrdma/softrdma)
	  --lib-dir DIR    softrdma's library folder (default \$SOFTRDMA_LIB_DIR, else ../../lib
	                   from the tool's folder, as in the build tree)
	  --out DIR        logs and results.md (default \$RXE_WORK/passthrough-results)
	  --only REGEX     run only the cases whose LAUNCH.NAME matches (e.g. 'env\.b')
	  --launch LIST    run, env or run,env (default): through 'softrdma run' in the guest, or
	                   with LD_LIBRARY_PATH alone
	  --keep-up        leave both guests running afterwards (reused by the next run)
	Exit status: 0 all cases passed, 1 some failed, 2 usage error, 77 skipped (no root, QEMU
	or guest image, or the guests did not boot).
	EOF
}

while (($#)); do
	case $1 in
	--softrdma) SOFTRDMA=${2:?--softrdma needs a path}; shift 2 ;;
	--lib-dir) LIB_DIR=${2:?--lib-dir needs a directory}; shift 2 ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--only) ONLY=${2:?--only needs a regex}; shift 2 ;;
	--launch) LAUNCH=${2:?--launch needs run, env or run,env}; shift 2 ;;
	--keep-up) KEEP_UP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "passthrough_guests.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done

skip() { echo "SKIP: passthrough interop: $*"; exit 77; }
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*"; }
bad_usage() { echo "passthrough_guests.sh: $*" >&2; exit 2; }

[[ $LAUNCH =~ ^(run|env)(,(run|env))?$ ]] || bad_usage "--launch takes run, env or run,env"
[[ -x $SOFTRDMA ]] || bad_usage "no softrdma tool at $SOFTRDMA (build it or pass --softrdma)"
SOFTRDMA=$(readlink -f "$SOFTRDMA")
LIB_DIR=${LIB_DIR:-${SOFTRDMA_LIB_DIR:-$(dirname "$SOFTRDMA")/../../lib}}
LIB_DIR=$(readlink -f "$LIB_DIR" 2>/dev/null || echo "$LIB_DIR")
for f in libibverbs.so.1 librdmacm.so.1 libsoftrdma_sysfs.so; do
	[[ -f $LIB_DIR/$f ]] || bad_usage "no $f in $LIB_DIR (build it or pass --lib-dir)"
done
# rdma-core's library has the same name and exports: only ours carries the marker.
grep -qaF 'softrdma-verbs-shim: not rdma-core' "$LIB_DIR/libibverbs.so.1" ||
	bad_usage "$LIB_DIR/libibverbs.so.1 is not softrdma's"

RXE=$SHARED/tools/interop-vm/rxe-guest.sh
W=${RXE_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/softrdma-interop}
SHARE=$W/run/share
OUT=${OUT:-$W/passthrough-results}
# shellcheck source=tests/interop/guest_prerequisites.sh
source "$SELF_DIR/guest_prerequisites.sh"
check_guest_prerequisites

T0=$SECONDS
ensure_guest_image

# Both guests kept up by an earlier --keep-up run are reused. Otherwise everything goes down
# first: `up A B` with A still running (rxe_interop.sh leaves A up with --keep-up) would start
# a second A on the same tap devices.
guest_alive() { # guest_alive G
	local pid
	pid=$("$RXE" status 2>/dev/null | sed -n "s/^$1: pid \([0-9]*\).*/\1/p")
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}
if ! guest_alive A || ! guest_alive B; then
	"$RXE" down >/dev/null 2>&1
	"$RXE" up A B >"$W.up.log" 2>&1 || { "$RXE" down >/dev/null 2>&1; skip "guests A and B did not boot (log: $W.up.log)"; }
fi
log "guests A and B up after $((SECONDS - T0)) s"

cleanup() {
	((KEEP_UP)) || "$RXE" down >/dev/null 2>&1
}
trap cleanup EXIT

guest() { "$RXE" ctl "$1" "$2" "${3:-120}"; }

# ------------------------------------------------------------------ staging ---
G=/share/softrdma GLIB=/share/softrdma/lib GDEPS=/share/softrdma/deps GLOG=/share/passthrough-logs
STAGE=$SHARE/softrdma HLOG=$SHARE/passthrough-logs
rm -rf "$STAGE" "$HLOG" "$OUT"
mkdir -p "$STAGE/lib" "$STAGE/bin" "$STAGE/deps" "$HLOG" "$OUT"
cp "$LIB_DIR"/{libibverbs.so.1,librdmacm.so.1,libsoftrdma_sysfs.so} "$STAGE/lib/"
cp "$SOFTRDMA" "$STAGE/bin/softrdma"
# hung-threads PGID, in the guest: a line per process of the group but the sh that wraps it,
# with where each of its threads waits in the kernel, for the log of a server that did not exit.
cat >"$STAGE/bin/hung-threads" <<'EOF_HUNG'
#!/bin/sh
for d in /proc/[0-9]*; do
	[ "$(cut -d' ' -f5 "$d/stat" 2>/dev/null)" = "$1" ] && [ "$(cat "$d/comm")" != sh ] || continue
	w=
	for t in "$d"/task/*; do w="$w $(cat "$t/wchan" 2>/dev/null)"; done
	echo "hung: ${d#/proc/} $(cat "$d/comm") waits in:$w"
done
EOF_HUNG
chmod +x "$STAGE/bin/hung-threads"
# What the guest root already has (the same files as the host's: rxe-guest.sh copies them).
guest_libs=" $(guest A 'ls /usr/lib/x86_64-linux-gnu /usr/lib64' | tr -d '\r' | tr '\n' ' ') "
deps=()
for f in "$SOFTRDMA" "$LIB_DIR"/{libibverbs.so.1,librdmacm.so.1,libsoftrdma_sysfs.so}; do
	while read -r lib; do
		case ${lib##*/} in
		libibverbs.so.1 | librdmacm.so.1 | libsoftrdma_sysfs.so | ld-linux-x86-64.so.2) continue ;; # ours / the loader
		esac
		[[ $guest_libs == *" ${lib##*/} "* ]] && continue
		[[ -e $STAGE/deps/${lib##*/} ]] && continue
		cp -L "$lib" "$STAGE/deps/" && deps+=("${lib##*/}")
	done < <(LD_LIBRARY_PATH=$LIB_DIR ldd "$f" 2>/dev/null | awk '/=>/ && $3 ~ /^\// {print $3}')
done
ln -s /lib64/ld-linux-x86-64.so.2 "$STAGE/deps/ld-linux-x86-64.so.2"
log "staged $(du -sh "$STAGE" | cut -f1) into $STAGE; deps the guest lacks: ${deps[*]:-none}"

# The guest-side launcher: sr LAUNCH LOGNAME PROGRAM ARGS... runs PROGRAM under softrdma's
# libraries, its loader's file log in $GLOG/LOGNAME.ld.PID (none with SR_NO_LD_DEBUG set);
# SR_MORE_LIBS is a folder for LD_LIBRARY_PATH after deps.
cat >"$STAGE/sr" <<-EOF
#!/bin/sh
l=\$1 n=\$2; shift 2
[ -n "\${SR_NO_LD_DEBUG:-}" ] || export LD_DEBUG=files LD_DEBUG_OUTPUT=$GLOG/\$n.ld
case \$l in
run) export LD_LIBRARY_PATH=$GDEPS\${SR_MORE_LIBS:+:\$SR_MORE_LIBS} SOFTRDMA_LIB_DIR=$GLIB; exec $G/bin/softrdma run -- "\$@" ;;
env) export LD_LIBRARY_PATH=$GLIB:$GDEPS\${SR_MORE_LIBS:+:\$SR_MORE_LIBS}; exec "\$@" ;;
esac
echo "sr: unknown launch \$l" >&2; exit 2
EOF
chmod +x "$STAGE/sr"
SR=$G/sr

GIDX_A=$(guest A 'gidx rxe0' | tr -d '\r\n')
GIDX_B=$(guest B 'gidx rxe0' | tr -d '\r\n')
[[ $GIDX_A =~ ^[0-9]+$ && $GIDX_B =~ ^[0-9]+$ ]] || { echo "passthrough_guests.sh: no IPv4 GID on rxe0 (A '$GIDX_A', B '$GIDX_B')"; exit 1; }

# ------------------------------------------------------------------- checks ---
FAILS=0
ROWS=()
WHY=()
finish() { # finish NAME LAUNCH EXPECTED DETAIL: a row from WHY (empty: pass)
	local result=pass
	((${#WHY[@]})) && result="FAIL: $(IFS=';'; echo "${WHY[*]}")"
	[[ $result == pass ]] || FAILS=$((FAILS + 1))
	log "$2.$1: $result${4:+ ($4)}"
	ROWS+=("| $1 | $2 | $3 | $result | ${4:-} |")
	mkdir -p "$OUT/$2"
	cp -r "$HLOG"/. "$OUT/$2"/ 2>/dev/null
	rm -rf "${HLOG:?}"/*
}
want() { local w="$*"; WHY+=("${w:0:200}"); } # a reason, cut to 200 characters
selected() { [[ $1.$2 =~ $ONLY ]]; } # selected LAUNCH NAME

# The device names ibv_devices printed, in order, on one line.
device_names() { awk 'NR > 2 && NF && !/^rc=/ {print $1}' "$1" | tr '\n' ' ' | sed 's/ $//'; }
# ld_ok NAME [real]: each LD_DEBUG log of NAME shows softrdma's libibverbs.so.1 initialised and,
# with real, rdma-core's loaded into namespace [1] (some process of NAME).
ld_ok() {
	local f n=0 real=0
	for f in "$HLOG/$1".ld.*; do
		[[ -e $f ]] || continue
		# a log of the softrdma tool alone (before its exec) has no libibverbs
		grep -q 'calling init: .*/libibverbs.so.1' "$f" || continue
		n=$((n + 1))
		grep -q "calling init: $GLIB/libibverbs.so.1\$" "$f" || want "$1: a process loaded another libibverbs.so.1 ($(grep -o 'calling init: .*/libibverbs.so.1' "$f" | head -1))"
		grep -q 'file=/usr/lib/x86_64-linux-gnu/libibverbs.so.1 \[1\]' "$f" && real=$((real + 1))
	done
	((n)) || want "$1: no process loaded softrdma's libibverbs.so.1"
	[[ ${2:-} != real ]] || ((real)) || want "$1: rdma-core's libibverbs.so.1 was not loaded by dlmopen"
}
# rc_of FILE: the status a guest command wrote as its last "rc=N" line
rc_of() { sed -n 's/^rc=\([0-9]*\).*/\1/p' "$1" | tail -1; }

# ibv_devices under softrdma in guest A: case_devices NAME LAUNCH EXPECTED_LIST NETNS(1|0) [PLACEMENT]
case_devices() {
	local name=$1 l=$2 expect=$3 netns=$4 placement=${5-after} cmd out err
	selected "$l" "$name" || return 0
	WHY=()
	cmd="$SR $l $name ibv_devices >$GLOG/$name.out 2>$GLOG/$name.err; echo rc=\$? >>$GLOG/$name.out"
	[[ -n $placement ]] && cmd="SOFTRDMA_REAL_DEVICES=$placement $cmd" || cmd="unset SOFTRDMA_REAL_DEVICES; $cmd"
	if ((netns)); then
		guest A "unshare -n sh -c 'ip link set lo up; $cmd'" 60 >/dev/null 2>&1
	else
		guest A "$cmd" 60 >/dev/null 2>&1
	fi
	out=$HLOG/$name.out err=$HLOG/$name.err
	[[ $(rc_of "$out") == 0 ]] || want "ibv_devices exited $(rc_of "$out")"
	local got
	got=$(device_names "$out")
	[[ $got == "$expect" ]] || want "listed '$got', expected '$expect'"
	if ((netns)); then
		[[ ! -s $err ]] || want "stderr: $(head -2 "$err" | tr '\n' ' ')"
	else
		# srdma0 cannot bind 4791 here: exactly one line about that, and nothing else
		if [[ $(wc -l <"$err") != 1 ]] || ! grep -q '^softrdma: .*4791' "$err"; then
			want "expected one stderr line about port 4791, got: $(head -3 "$err" | tr '\n' ' ')"
		fi
	fi
	if [[ $expect == *rxe0* ]]; then ld_ok "$name" real; else ld_ok "$name"; fi
	local detail="devices: $got"
	((netns)) || detail+="; stderr: $(head -1 "$err")"
	finish "$name" "$l" "pass" "$detail"
}

# guest_server_log G NAME: NAME's log once its exit= line is there (killed after 30 s without one,
# its threads' kernel waits logged first)
guest_server_log() {
	guest "$1" "i=0; while [ \$i -lt 300 ] && ! grep -q ^exit= $GLOG/$2.srv; do usleep 100000; i=\$((i+1)); done
		grep -q ^exit= $GLOG/$2.srv || { $G/bin/hung-threads \$(cat /tmp/$2.pid) >>$GLOG/$2.srv
			kill -9 -\$(cat /tmp/$2.pid) 2>/dev/null; echo exit=killed >>$GLOG/$2.srv; }; sync" 60 >/dev/null 2>&1
}

# A server in guest B and a client in guest A, both under softrdma:
# case_pair NAME LAUNCH "SERVER CMD" "CLIENT CMD" READY CHECK
#   READY: a guest command that returns once the server listens; CHECK: a function called
#   with the server and client logs that adds to WHY.
# A pair that fails runs once more and only the second run counts, as rxe_interop.sh's cases
# do: in the emulated guests a server now and then printed nothing and was killed after 90 s
# (e.send_bw_R). The first run's logs stay in OUT/LAUNCH as NAME.try1.*.
case_pair() {
	local name=$1 l=$2 fails=$FAILS rows=${#ROWS[@]} f
	case_pair_once "$@"
	((FAILS > fails)) || return 0
	FAILS=$fails
	ROWS=("${ROWS[@]:0:rows}")
	for f in "$OUT/$l/$name".*; do mv "$f" "$OUT/$l/$name.try1.${f#"$OUT/$l/$name."}"; done
	log "$l.$name: failed; running it again, its logs kept as $name.try1.*"
	# A first server still alive would hold the port and the device the second one needs.
	guest B "kill -9 -\$(cat /tmp/$name.pid) 2>/dev/null; true" 30 >/dev/null 2>&1
	case_pair_once "$@"
}
case_pair_once() {
	local name=$1 l=$2 scmd=$3 ccmd=$4 ready=$5 check=$6 t=$SECONDS
	selected "$l" "$name" || return 0
	WHY=()
	guest B "export SOFTRDMA_REAL_DEVICES=after; bgrun $name sh -c '$SR $l $name.srv $scmd >$GLOG/$name.srv 2>&1; echo exit=\$? >>$GLOG/$name.srv'; $ready" 60 >/dev/null 2>&1
	guest A "export SOFTRDMA_REAL_DEVICES=after; timeout 90 $SR $l $name.cli $ccmd >$GLOG/$name.cli 2>&1; echo exit=\$? >>$GLOG/$name.cli" 120 >/dev/null 2>&1
	guest_server_log B "$name"
	local srv=$HLOG/$name.srv cli=$HLOG/$name.cli
	grep -q '^exit=0$' "$srv" || want "server $(grep '^exit=' "$srv" || echo 'no exit status'): $(grep -v '^exit=' "$srv" | grep -iE 'error|fail|couldn|unable|no such|not found|no device for|^hung:' | head -1)"
	grep -q '^exit=0$' "$cli" || want "client $(grep '^exit=' "$cli" || echo 'no exit status'): $(grep -v '^exit=' "$cli" | grep -iE 'error|fail|couldn|unable|no such|not found|no device for' | head -1)"
	"$check" "$srv" "$cli"
	ld_ok "$name.srv" real
	ld_ok "$name.cli" real
	finish "$name" "$l" "pass" "$DETAIL, $((SECONDS - t)) s"
}
DETAIL=
check_pingpong() { # both print their result and see each other's rxe0 GID
	local f
	for f in "$1" "$2"; do grep -q 'iters in' "$f" || want "no result in $(basename "$f")"; done
	grep -q 'remote address:.*GID ::ffff:10.99.0.2' "$1" || want "server saw no remote GID ::ffff:10.99.0.2"
	grep -q 'remote address:.*GID ::ffff:10.99.0.3' "$2" || want "client saw no remote GID ::ffff:10.99.0.3"
	DETAIL=$(grep -h 'iters in' "$2" | head -1)
}
check_perftest() { # both print the result row on rxe0
	local f
	for f in "$1" "$2"; do
		grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$f" || want "no result row in $(basename "$f")"
		grep -q 'Device *: rxe0' "$f" || want "$(basename "$f") did not run on rxe0"
	done
	DETAIL="result row: $(grep -Eh '^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+' "$2" | head -1 | tr -s ' \t' ' ')"
}
check_cmatose() { # both ends complete their transfers
	local f
	for f in "$1" "$2"; do grep -q '^return status 0' "$f" || want "no 'return status 0' in $(basename "$f")"; done
	DETAIL=$(grep -h 'data transfers complete' "$2" | head -1)
}
check_rping() { # every ping reached the client
	local got
	got=$(grep -c '^ping data: rdma-ping-' "$2")
	((got == 5)) || want "$got of 5 pings"
	DETAIL="$got of 5 pings"
}

# srdma0 server and client in one fresh netns of guest A
case_srdma0_pair() {
	local name=$1 l=$2 t=$SECONDS
	selected "$l" "$name" || return 0
	WHY=()
	local pp="ibv_rc_pingpong -d srdma0 -g 0 -n 20 -s 4096"
	guest A "export SOFTRDMA_REAL_DEVICES=after; unshare -n sh -c 'ip link set lo up
		$SR $l $name.srv $pp >$GLOG/$name.srv 2>&1 & s=\$!
		waitport 18515
		timeout 60 $SR $l $name.cli $pp 127.0.0.1 >$GLOG/$name.cli 2>&1; echo exit=\$? >>$GLOG/$name.cli
		i=0; while [ \$i -lt 100 ] && kill -0 \$s 2>/dev/null; do usleep 100000; i=\$((i+1)); done
		kill -9 \$s 2>/dev/null; wait \$s; echo exit=\$? >>$GLOG/$name.srv'" 120 >/dev/null 2>&1
	local srv=$HLOG/$name.srv cli=$HLOG/$name.cli f
	for f in "$srv" "$cli"; do
		grep -q '^exit=0$' "$f" || want "$(basename "$f") $(grep '^exit=' "$f" || echo 'no exit status'): $(grep -v '^exit=' "$f" | head -2 | tr '\n' ' ')"
		grep -q 'iters in' "$f" || want "no result in $(basename "$f")"
		grep -q 'local address:.*GID ::ffff:127\.0\.0\.' "$f" || want "$(basename "$f") not on a 127.0.0.N GID"
	done
	ld_ok "$name.srv"
	ld_ok "$name.cli"
	finish "$name" "$l" "pass" "$(grep -h 'iters in' "$cli" | head -1), $((SECONDS - t)) s"
}

# The staged tool and library load in the guest: nothing "not found" for the loader.
case_stage() {
	local l=$1 name=stage
	selected "$l" "$name" || return 0
	WHY=()
	guest A "for f in $G/bin/softrdma $GLIB/libibverbs.so.1 $GLIB/librdmacm.so.1 $GLIB/libsoftrdma_sysfs.so; do
		echo \"== \$f\"; LD_LIBRARY_PATH=$GLIB:$GDEPS /lib64/ld-linux-x86-64.so.2 --list \$f; done >$GLOG/stage.out 2>&1
		LD_LIBRARY_PATH=$GDEPS $G/bin/softrdma run --help >/dev/null 2>>$GLOG/stage.out; echo rc=\$? >>$GLOG/stage.out" 60 >/dev/null 2>&1
	local out=$HLOG/stage.out
	grep -q 'not found' "$out" && want "$(grep 'not found' "$out" | head -3 | tr -s '\t\n' '  ')"
	grep -q 'libibverbs.so.1 => /usr/lib' "$out" && want "rdma-core's libibverbs resolved before softrdma's"
	[[ $(rc_of "$out") == 0 ]] || want "softrdma run --help exited $(rc_of "$out")"
	finish "$name" "$l" "pass" "deps copied: ${deps[*]:-none}"
}

# f. rdma-core's Python suite (Debian's python3-pyverbs, the `core` category of
# tests/shim/rdma-core-tests-inventory.tsv: 100 tests) on rxe0 in guest A, once on rdma-core
# alone and once per launch under softrdma; each test must end the same way (ok/skipped/FAIL/
# ERROR) in both, or, where rxe itself is flaky, the two must meet in a recheck (py_recheck).
# The guest has no Python: the host's /usr/bin/python3.11, its standard library (without
# test/, idlelib/, tkinter/ ...), pyverbs and the suite (its .gz files unpacked) go to /share/py,
# with the shared libraries the guest lacks in /share/py/deps (after softrdma's on
# LD_LIBRARY_PATH). Python finds its library from its own path (/share/py/usr).
PY_OK=
PY_BASE=
stage_python() {
	local P=$SHARE/py inventory=$REPO/tests/shim/rdma-core-tests-inventory.tsv pyver
	[[ -n $PY_OK ]] && return "$PY_OK"
	PY_OK=1
	pyver=$(/usr/bin/python3 -c 'import sys; print("python%d.%d" % sys.version_info[:2])' 2>/dev/null) || return 1
	/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || return 1
	[[ -d /usr/share/doc/rdma-core/tests && -f $inventory && -d /usr/lib/$pyver ]] || return 1
	rm -rf "$P"
	mkdir -p "$P/usr/bin" "$P/usr/lib/python3/dist-packages" "$P/deps" "$P/tests"
	cp -L "/usr/bin/$pyver" "$P/usr/bin/python3"
	cp -a "/usr/lib/$pyver" "$P/usr/lib/"
	rm -rf "$P/usr/lib/$pyver"/{test,idlelib,tkinter,ensurepip,lib2to3,turtledemo,config-*}
	find "$P" -name __pycache__ -prune -exec rm -rf {} +
	cp -a /usr/lib/python3/dist-packages/pyverbs "$P/usr/lib/python3/dist-packages/"
	cp -a /usr/share/doc/rdma-core/tests/. "$P/tests/"
	gunzip -fq "$P"/tests/*.gz
	local lib
	while read -r lib; do
		case ${lib##*/} in libibverbs.so.1 | librdmacm.so.1) continue ;; esac # never rdma-core's
		[[ $guest_libs == *" ${lib##*/} "* ]] || cp -L "$lib" "$P/deps/"
	done < <(for f in "$P/usr/bin/python3" $(find "$P" -name '*.so'); do ldd "$f" 2>/dev/null; done |
		awk '/=>/ && $3 ~ /^\// {print $3}' | sort -u)
	awk -F'\t' '$2 == "core" {print $1}' "$inventory" >"$P/core.ids"
	PY_OK=0
}
# py_suite LAUNCH|plain NAME [TEST IDS]: runs the suite (or those tests) in guest A, its output
# in $HLOG/NAME.log
py_suite() {
	local run="/share/py/usr/bin/python3 tests/run_tests.py -v --dev rxe0 --port 1 ${3:-\$(cat core.ids)}"
	if [[ $1 == plain ]]; then
		run="env LD_LIBRARY_PATH=/share/py/deps $run"
	else
		run="env SR_NO_LD_DEBUG=1 SR_MORE_LIBS=/share/py/deps SOFTRDMA_REAL_DEVICES=after $SR $1 $2 $run"
	fi
	guest A "cd /share/py && timeout 300 $run >$GLOG/$2.log 2>&1; echo rc=\$? >>$GLOG/$2.log" 330 >/dev/null 2>&1
}
# ok/skipped/FAIL/ERROR per test, "NAME OUTCOME" lines (a docstring puts " ... " a line later)
# (and a line on stderr, such as softrdma's about port 4791, can come between " ... " and it)
py_outcomes() {
	awk '/^test_[A-Za-z0-9_]+ \(/ {name = $1; pending = 0}
		match($0, / \.\.\. (ok|FAIL|ERROR|skipped)/) { print name, substr($0, RSTART + 5, RLENGTH - 5); pending = 0; next }
		/ \.\.\. / {pending = 1; next}
		pending && match($0, /^(ok|FAIL|ERROR|skipped)/) { print name, substr($0, RSTART, RLENGTH); pending = 0 }' "$1" | sort
}
py_counts() { # "ok=N skipped=N FAIL=N ERROR=N"
	local o c out=
	for o in ok skipped FAIL ERROR; do
		c=$(awk -v o="$o" '$2 == o' "$1" | wc -l)
		out+="$o=$c "
	done
	echo "${out% }"
}
case_pyverbs() {
	local name=f.pyverbs l=$1 t=$SECONDS
	selected "$l" "$name" || return 0
	WHY=()
	if ! stage_python; then
		log "$l.$name: skipped (no /usr/bin/python3 with pyverbs or no /usr/share/doc/rdma-core/tests on the host)"
		ROWS+=("| $name | $l | pass | skipped | no pyverbs or rdma-core tests on the host |")
		return 0
	fi
	if [[ -z $PY_BASE ]]; then
		py_suite plain f.pyverbs.plain
		mkdir -p "$OUT/plain"
		mv "$HLOG/f.pyverbs.plain.log" "$OUT/plain/"
		py_outcomes "$OUT/plain/f.pyverbs.plain.log" >"$OUT/plain/f.pyverbs.outcomes"
		PY_BASE=$(py_counts "$OUT/plain/f.pyverbs.outcomes")
		log "pyverbs core suite on rdma-core alone: $PY_BASE"
	fi
	py_suite "$l" "$name"
	py_outcomes "$HLOG/$name.log" >"$HLOG/$name.outcomes"
	local ours n total
	ours=$(py_counts "$HLOG/$name.outcomes")
	n=$(wc -l <"$HLOG/$name.outcomes")
	total=$(wc -l <"$SHARE/py/core.ids")
	((n == total)) || want "$n outcomes of $total tests ($(grep -m1 -E '^(Traceback|rc=|timeout:)' "$HLOG/$name.log"))"
	local differ still flaky=""
	differ=$(comm -3 <(sort "$HLOG/$name.outcomes") <(sort "$OUT/plain/f.pyverbs.outcomes") | awk '{print $1}' | sort -u)
	if [[ -n $differ ]]; then
		still=$(py_recheck "$l" "$name" $differ)
		[[ -n $still ]] && want "differing tests (softrdma's outcome): $(echo $still | head -c 150)"
		flaky=$(paste -sd';' "$HLOG/$name.flaky" | sed 's/;/, /g')
	fi
	finish "$name" "$l" "pass" "rdma-core alone: $PY_BASE; softrdma: $ours${flaky:+; differed once, then met on a rerun: $flaky}; $((SECONDS - t)) s"
}

# Each test whose outcome differed runs twice more in each mode. The difference stands only when
# the outcomes never meet: rxe's test_resize_cq ends FAIL now and then on rdma-core alone too.
# Those that met go to $HLOG/NAME.flaky, "TEST (alone OUTCOMES, softrdma OUTCOMES)" a line.
py_recheck() { # py_recheck LAUNCH NAME TEST...: prints "TEST=OUTCOMES" of those that still differ
	local l=$1 name=$2 k t ids=() plain_runs=("$OUT/plain/f.pyverbs.outcomes")
	local our_runs=("$HLOG/$name.outcomes")
	shift 2
	for t in "$@"; do ids+=("$(grep -m1 "\\.$t\$" "$SHARE/py/core.ids")"); done
	for k in 1 2; do
		py_suite plain "$name.plain$k" "${ids[*]}"
		py_outcomes "$HLOG/$name.plain$k.log" >"$HLOG/$name.plain$k.outcomes"
		plain_runs+=("$HLOG/$name.plain$k.outcomes")
		py_suite "$l" "$name.again$k" "${ids[*]}"
		py_outcomes "$HLOG/$name.again$k.log" >"$HLOG/$name.again$k.outcomes"
		our_runs+=("$HLOG/$name.again$k.outcomes")
	done
	: >"$HLOG/$name.flaky"
	for t in "$@"; do
		local alone ours
		alone=$(awk -v t="$t" '$1 == t {print $2}' "${plain_runs[@]}" | sort -u | paste -sd/)
		ours=$(awk -v t="$t" '$1 == t {print $2}' "${our_runs[@]}" | sort -u | paste -sd/)
		if comm -12 <(tr / '\n' <<<"$alone") <(tr / '\n' <<<"$ours") | grep -q .; then
			echo "$t (alone $alone, softrdma $ours)" >>"$HLOG/$name.flaky"
		else
			echo "$t=$ours"
		fi
	done
}

IFS=, read -ra launches <<<"$LAUNCH"
case_stage "${launches[0]}"
for l in "${launches[@]}"; do
	case_devices a.after "$l" "srdma0 rxe0 siw0" 1 after
	case_devices a.hide "$l" "srdma0" 1 hide
	[[ $l == env ]] && case_devices a.first "$l" "rxe0 siw0 srdma0" 1 ""
	case_devices a.rootns "$l" "rxe0 siw0" 0 after
	case_pair b.rc_pingpong "$l" "ibv_rc_pingpong -d rxe0 -g $GIDX_B -n 20 -s 4096 -c" \
		"ibv_rc_pingpong -d rxe0 -g $GIDX_A -n 20 -s 4096 -c 10.99.0.3" "waitport 18515" check_pingpong
	case_pair c.write_bw "$l" "ib_write_bw -d rxe0 -x $GIDX_B -n 100 -s 8192" \
		"ib_write_bw -d rxe0 -x $GIDX_A -n 100 -s 8192 10.99.0.3" "waitport 18515" check_perftest
	case_srdma0_pair d.srdma0_pair "$l"
	# rdma_cm over rxe0 listens on no TCP port: the server gets 3 s
	case_pair e.rping "$l" "rping -s -a 10.99.0.3 -C 5 -v" "rping -c -a 10.99.0.3 -C 5 -v" "sleep 3" check_rping
	case_pair e.rping_siw "$l" "rping -s -a 10.99.1.3 -C 5 -v" "rping -c -a 10.99.1.3 -C 5 -v" "sleep 3" check_rping
	case_pair e.ucmatose "$l" "ucmatose" "ucmatose -s 10.99.0.3" "sleep 3" check_cmatose
	case_pair e.send_bw_R "$l" "ib_send_bw -R -d rxe0 -n 100" "ib_send_bw -R -d rxe0 -n 100 10.99.0.3" "sleep 4" check_perftest
	case_pyverbs "$l"
done

{
	echo "| case | launch | expected | result | detail |"
	echo "|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} >"$OUT/results.md"
cat "$OUT/results.md"
log "${#ROWS[@]} cases, $FAILS failed, $((SECONDS - T0)) s; results in $OUT/results.md"
((FAILS == 0))

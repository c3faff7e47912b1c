#!/bin/bash
# rxe_interop.sh - softrdma against Linux Soft-RoCE (rxe, kernel 6.12) over a real bridge,
# both directions, the verbs programs and librdmacm programs (rping, ucmatose, perftest -R),
# then against Linux siw (iWARP: rping's protocol, rping and perftest -R), each exchange
# captured and checked.
#
# The rxe peer is guest A of SOFTRDMA_SHARED_DIR/tools/interop-vm/rxe-guest.sh (QEMU inside the
# network namespace that script creates; 10.99.0.2, rxe0). softrdma runs on the host side of
# the same bridge (10.99.0.1) with `softrdma run`. For every case the script checks:
#   - both programs exit 0;
#   - the capture taken on br0 passes `softrdma dump --check` (our decoder verifies the ICRC
#     of every packet, rxe's included) and tshark-validate.sh (UDP checksums not judged:
#     both ends send checksum 0 over IPv4, but tcpdump on the bridge may see offload state);
#   - softrdma dropped no packet for its ICRC (icrc_err 0 in SOFTRDMA_STATS_FILE), and took
#     rxe's through the IPv4 ID solver (icrc_ipv4_id_solved > 0; wire/icrc_ipv4_id.hpp);
#   - rxe verified the ICRC of every packet softrdma put on the wire: rxe counts rcvd_pkts
#     only after its ICRC check, so its increase equals our packets in the capture.
# Results: OUT/matrix.md (program x direction x result), and per case NAME.pcap, logs and
# checker output in OUT.
#
# Skips (exit 77, ctest's SKIP_RETURN_CODE) with one line saying why where the guests
# cannot run: not root, no network namespaces, no QEMU, no rxe-guest.sh, or the guest image
# cannot be built or booted (it is built once and cached in $RXE_WORK, default
# ~/.cache/softrdma-interop; the first build downloads ~280 MB).
set -uo pipefail

SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$SELF_DIR/../.." && pwd)
SHARED=${SOFTRDMA_SHARED_DIR:-$REPO/../shared}
SOFTRDMA=$REPO/build/tools/softrdma/softrdma
IWARP_RPING=$REPO/build/tests/interop/iwarp_rping
OUT=
ONLY=.
KEEP_UP=0

usage() {
	cat <<-EOF
	usage: rxe_interop.sh [--softrdma PATH] [--iwarp-rping PATH] [--out DIR] [--only REGEX] [--keep-up]
	Runs RDMA programs between softrdma (host side, 10.99.0.1) and Linux rxe in a QEMU guest
	(10.99.0.2), both directions, and checks each exchange's capture and ICRC counters; then
	rping's protocol, rping and perftest -R between softrdma's iWARP device (10.99.1.1) and Linux
	siw (10.99.1.2).
	  --softrdma PATH  the softrdma tool (default $REPO/build/tools/softrdma/softrdma)
	  --iwarp-rping PATH  tests/interop/iwarp_rping (default under $REPO/build)
	  --out DIR        captures, logs and matrix.md (default \$RXE_WORK/interop-results)
	  --only REGEX     run only the cases whose name matches (e.g. 'rc_pingpong')
	  --keep-up        leave the guest running afterwards (it is reused by the next run)
	Exit status: 0 all cases passed, 1 some failed, 2 usage error, 77 skipped (no root,
	network namespaces, QEMU or guest image).
	EOF
}

while (($#)); do
	case $1 in
	--softrdma) SOFTRDMA=${2:?--softrdma needs a path}; shift 2 ;;
	--iwarp-rping) IWARP_RPING=${2:?--iwarp-rping needs a path}; shift 2 ;;
	--out) OUT=${2:?--out needs a directory}; shift 2 ;;
	--only) ONLY=${2:?--only needs a regex}; shift 2 ;;
	--keep-up) KEEP_UP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "rxe_interop.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
	esac
done

skip() { echo "SKIP: rxe interop: $*"; exit 77; }
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*"; }

RXE=$SHARED/tools/interop-vm/rxe-guest.sh
W=${RXE_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/softrdma-interop}
NS=${RXE_NETNS:-rdmanet}
OUT=${OUT:-$W/interop-results}
[[ -x $SOFTRDMA ]] || { echo "rxe_interop.sh: no softrdma tool at $SOFTRDMA (build it or pass --softrdma)" >&2; exit 2; }
[[ -x $IWARP_RPING ]] || { echo "rxe_interop.sh: no iwarp_rping at $IWARP_RPING (build it or pass --iwarp-rping)" >&2; exit 2; }
# shellcheck source=tests/interop/guest_prerequisites.sh
source "$SELF_DIR/guest_prerequisites.sh"
check_guest_prerequisites
command -v tcpdump >/dev/null || skip "tcpdump is not installed (scripts/install-deps.sh)"
command -v tshark >/dev/null || skip "tshark is not installed (scripts/install-deps.sh)"

T0=$SECONDS
ensure_guest_image
STARTED_GUEST=0
# A guest kept up by an earlier run is reused; `status` reads its pid file, which outlives a
# guest that died with its machine, so the pid must also be alive.
guest_alive() {
	local pid
	pid=$("$RXE" status 2>/dev/null | sed -n 's/^A: pid \([0-9]*\).*/\1/p')
	[[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}
if ! guest_alive; then
	"$RXE" down >/dev/null 2>&1
	"$RXE" up A >"$W.up.log" 2>&1 || { "$RXE" down >/dev/null 2>&1; skip "guest A did not boot (log: $W.up.log)"; }
	STARTED_GUEST=1
fi
log "guest A up after $((SECONDS - T0)) s"
mkdir -p "$OUT"
rm -f "$OUT"/*.pcap "$OUT"/*.log "$OUT"/*.json "$OUT"/*.psv

CAP_PID=
cleanup() {
	[[ -n $CAP_PID ]] && kill "$CAP_PID" 2>/dev/null
	if ((STARTED_GUEST && !KEEP_UP)); then "$RXE" down >/dev/null 2>&1; fi
}
trap cleanup EXIT

nsx() { ip netns exec "$NS" "$@"; }
guest() { "$RXE" ctl A "$1" "${2:-120}"; }
GIDX=$(guest 'gidx rxe0' | tr -d '\r\n')
[[ $GIDX =~ ^[0-9]+$ ]] || { echo "rxe_interop.sh: no IPv4 GID on rxe0 in guest A ('$GIDX')"; exit 1; }
RXE_IP=10.99.0.2 OUR_IP=10.99.0.1 PORT=18515

rxe_rcvd_pkts() { guest 'cat /sys/class/infiniband/rxe0/ports/1/hw_counters/rcvd_pkts' | tr -d '\r\n'; }
# Frames towards the guest lost before rxe sees them, when the TCG guest falls behind a burst
# (go-back-N resends under loss): the tap queue overflows, the guest's NIC drops them, or its
# input backlog does (/proc/net/softnet_stat's second column, one CPU).
frames_lost_towards_rxe() {
	echo $(($(nsx cat /sys/class/net/tA0/statistics/tx_dropped) +
		$(guest 'read cpu dropped rest </proc/net/softnet_stat
			echo $(($(cat /sys/class/net/eth0/statistics/rx_dropped) + 0x$dropped))' | tr -d '\r\n')))
}

# The device and GID-index options of a program: pingpongs take -g, perftest -x; rdmacm-utils
# find the device from the address.
dev_args() { # dev_args PROGRAM DEVICE GID_INDEX
	case $1 in ibv_*) echo "-d $2 -g $3" ;; rping | ucmatose | udaddy) ;; *) echo "-d $2 -x $3" ;; esac
}

# Programs that connect through rdma_cm (rdmacm-utils, perftest -R) listen on no TCP port:
# their server is given a few seconds instead (the guest is emulated).
is_cm() { [[ $1 == rping || $1 == ucmatose || $1 == udaddy || " $2 " == *" -R "* ]]; }
# A side's arguments: ARGS "SERVER ARGS|CLIENT ARGS" gives each its own, {server} standing for
# the server's address; plain ARGS serve both, the client's followed by the server's address.
side_args() { # side_args ARGS ROLE SERVER_ADDRESS
	local a=$1
	if [[ $a != *'|'* ]]; then
		[[ $2 == client ]] && a="$a $3"
		echo "$a"
		return
	fi
	if [[ $2 == server ]]; then a=${a%%|*}; else a=${a#*|}; fi
	echo "${a//\{server\}/$3}"
}

capture_start() { # capture_start FILE [BRIDGE FILTER]
	# A snaplen above the bridge's 1500-byte MTU but far below the default 256 KiB: the ring
	# holds buffer/snaplen frames, and with the default it dropped packets of a burst.
	# (not through nsx: $! must be tcpdump itself, which `ip netns exec` becomes)
	ip netns exec "$NS" tcpdump -Z root -i "${2:-br0}" --immediate-mode -B 16384 -s 2048 -U -w "$1" "${3:-udp port 4791}" \
		>/dev/null 2>"$1.tcpdump.log" </dev/null &
	CAP_PID=$!
	local i
	for i in $(seq 50); do grep -qs listening "$1.tcpdump.log" && return 0; sleep 0.1; done
}
capture_stop() { # once the file stops growing: on a busy machine tcpdump drains its ring late
	local size=-1 i
	for i in $(seq 40); do
		sleep 0.25
		[[ $(stat -c %s "$1") == "$size" ]] && break
		size=$(stat -c %s "$1")
	done
	kill -TERM "$CAP_PID" 2>/dev/null
	wait "$CAP_PID" 2>/dev/null
	CAP_PID=
}

# The log of a server started in the guest with `bgrun NAME`, once it has printed its exit=
# line (PROGRAM is killed after 10 s without one).
guest_server_log() { # guest_server_log NAME PROGRAM
	guest "i=0; while [ \$i -lt 100 ] && ! grep -q ^exit= /tmp/$1.log; do usleep 100000; i=\$((i+1)); done
		grep -q ^exit= /tmp/$1.log || killall -9 $2; cat /tmp/$1.log"
}

wait_host_port() { # a TCP listener on PORT in the namespace (softrdma's server side)
	local i
	for i in $(seq 100); do
		[[ -n $(nsx ss -Hltn "sport = :$PORT") ]] && return 0
		sleep 0.1
	done
	return 1
}

json_field() { # json_field FILE GROUP KEY: a number from a SOFTRDMA_STATS_FILE report
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]])' "$1" "$2" "$3" 2>/dev/null || echo "?"
}

FAILS=0
ROWS=()
# Ends a case: pass, or FAIL with the reasons given; a log line and a row of the matrix.
finish_case() { # finish_case NAME PCAP "PROGRAM CELL" ARROW "LOG DETAILS" [REASON...]
	local name=$1 pcap=$2 program=$3 arrow=$4 details=$5 result=pass packets
	shift 5
	if (($#)); then
		result="FAIL: $(IFS=';'; echo "$*")"
		FAILS=$((FAILS + 1))
	fi
	packets=$(tcpdump -r "$pcap" -n 2>/dev/null | wc -l)
	log "$name: $result ($packets packets$details)"
	ROW_OF[$name]=${#ROWS[@]}
	ROWS+=("| $program | $arrow | $result | $packets |")
}
declare -A ROW_OF TSHARK_JOB

# tshark-validate.sh takes a second or two a capture: each case's runs in the background while
# the next case runs, and a capture it rejects fails the suite at the end (tshark_verdicts).
tshark_in_background() { # tshark_in_background NAME PCAP CHECKSUM_SETTING (e.g. TSHARK_UDP_CHECKSUM=FALSE)
	env "$3" "$SHARED/tools/tshark-validate.sh" "$2" "$OUT" >"$OUT/$1.tshark.log" 2>&1 &
	TSHARK_JOB[$1]=$!
}
tshark_done() { # tshark_done NAME: NAME's validation has ended (before its files are moved)
	[[ -z ${TSHARK_JOB[$1]:-} ]] || wait "${TSHARK_JOB[$1]}"
	return 0
}
tshark_verdicts() { # a rejected capture fails its case: in the log and in the case's row
	local name i why="tshark-validate rejected the capture"
	for name in "${!TSHARK_JOB[@]}"; do
		wait "${TSHARK_JOB[$name]}" && continue
		log "$name: FAIL: $why (see $name.tshark.log)"
		i=${ROW_OF[$name]}
		if [[ ${ROWS[i]} == *"| pass |"* ]]; then
			ROWS[i]=${ROWS[i]/"| pass |"/"| FAIL: $why |"}
			FAILS=$((FAILS + 1))
		else
			ROWS[i]=${ROWS[i]/"| FAIL: "/"| FAIL: $why;"}
		fi
	done
}
# run_case NAME DIRECTION PROGRAM "ARGS" ["SOFTRDMA RUN OPTIONS"]
#   DIRECTION to-rxe: softrdma is the client, rxe the server; from-rxe: the reverse.
# A case that fails is run once more, and only the last run counts (its row in the matrix,
# FAILS); each failed attempt's files stay in OUT as NAME.tryN.*. rc_pingpong.tx-loss hung
# about once in ten runs while its loss took our ACKs too (an rxe completer bug: see that case),
# and retrying the one case costs seconds where ctest's retry of the whole suite cost minutes.
run_case() { retried run_case_once "$@"; }

# A failure that a case recognises as one of siw's own races (run_siw_perftest) names it in
# PEER_RACE and is run again up to PEER_RACE_RUNS more times, apart from the one retry any
# failure gets; a clean run is still required. Under the guest's emulated CPU the accept race
# takes most attempts of some cases, so the bound is what keeps a run of races from failing
# the suite, not the race's rarity; a detected race costs seconds.
PEER_RACE="" PEER_RACE_RUNS=10
CASE_FILES=(pcap pcap.tcpdump.log pcap.iwarp.psv pcap.roce.psv softrdma.log rxe.log siw.log dump.log tshark.log stats.json)

retried() { # retried FUNCTION NAME ARGS...: FUNCTION NAME ARGS..., again while it fails (above)
	local fn=$1 name=$2 fails=$FAILS rows=${#ROWS[@]} retry=1 races=$PEER_RACE_RUNS attempt=1 f
	shift
	while :; do
		PEER_RACE=""
		"$fn" "$@"
		((FAILS > fails)) || return 0
		if [[ -n $PEER_RACE ]] && ((races > 0)); then
			races=$((races - 1))
		elif ((retry > 0)); then
			retry=0
		else
			return 0
		fi
		FAILS=$fails
		ROWS=("${ROWS[@]:0:rows}")
		tshark_done "$name"
		for f in "${CASE_FILES[@]}"; do
			[[ -e $OUT/$name.$f ]] && mv "$OUT/$name.$f" "$OUT/$name.try$attempt.$f"
		done
		log "$name: failed${PEER_RACE:+ ($PEER_RACE)}; running it again, its files kept as $name.try$attempt.*"
		attempt=$((attempt + 1))
	done
}

run_case_once() {
	local name=$1 dir=$2 prog=$3 args=$4 runopts=${5:-} why=() t=$SECONDS
	[[ $name =~ $ONLY ]] || return 0
	local pcap=$OUT/$name.pcap stats=$OUT/$name.stats.json ours=$OUT/$name.softrdma.log
	local ours_cmd=(env SOFTRDMA_STATS_FILE="$stats" "$SOFTRDMA" run --ip "$OUR_IP" $runopts -- "$prog" $(dev_args "$prog" srdma0 0))
	local theirs="$prog $(dev_args "$prog" rxe0 "$GIDX")"
	local before lost_before rc_ours=0 rc_theirs=0
	before=$(rxe_rcvd_pkts)
	lost_before=$(frames_lost_towards_rxe)
	capture_start "$pcap"
	if [[ $dir == to-rxe ]]; then
		local ready="waitport $PORT; sleep 0.3"
		is_cm "$prog" "$args" && ready="sleep 3"
		guest "bgrun $name sh -c '$theirs $(side_args "$args" server "$RXE_IP"); echo exit=\$?'; $ready" >/dev/null
		timeout 90 ip netns exec "$NS" "${ours_cmd[@]}" $(side_args "$args" client "$RXE_IP") >"$ours" 2>&1 || rc_ours=$?
		guest_server_log "$name" $prog >"$OUT/$name.rxe.log" 2>&1
		grep -q '^exit=0' "$OUT/$name.rxe.log" || rc_theirs=1
	else
		timeout 120 ip netns exec "$NS" "${ours_cmd[@]}" $(side_args "$args" server "$OUR_IP") >"$ours" 2>&1 &
		local ours_pid=$!
		local up=0
		if is_cm "$prog" "$args"; then sleep 2; else wait_host_port || up=1; fi
		if ((up == 0)); then
			guest "timeout 90 $theirs $(side_args "$args" client "$OUR_IP")" 100 >"$OUT/$name.rxe.log" 2>&1 || rc_theirs=$?
		else
			rc_theirs=124
		fi
		wait "$ours_pid" || rc_ours=$?
	fi
	capture_stop "$pcap"
	((rc_ours == 0)) || why+=("softrdma side exited $rc_ours")
	((rc_theirs == 0)) || why+=("rxe side failed")
	grep -q '^0 packets dropped by kernel' "$pcap.tcpdump.log" || why+=("capture incomplete: $(grep -o '[0-9]* packets dropped by kernel' "$pcap.tcpdump.log")")
	"$SOFTRDMA" dump --check "$pcap" >"$OUT/$name.dump.log" 2>&1 || why+=("dump --check failed")
	tshark_in_background "$name" "$pcap" TSHARK_UDP_CHECKSUM=FALSE
	local icrc_err solved ours_on_wire theirs_on_wire rxe_took lost
	icrc_err=$(json_field "$stats" counters icrc_err)
	solved=$(json_field "$stats" counters icrc_ipv4_id_solved)
	[[ $icrc_err == 0 ]] || why+=("softrdma icrc_err=$icrc_err")
	ours_on_wire=$(tcpdump -r "$pcap" -n "src host $OUR_IP" 2>/dev/null | wc -l)
	theirs_on_wire=$(tcpdump -r "$pcap" -n "src host $RXE_IP" 2>/dev/null | wc -l)
	# (icrc_err 0 already proves every packet we took verified; this proves the solver ran)
	((theirs_on_wire == 0)) || [[ $solved =~ ^[1-9] ]] || why+=("no rxe packet verified through the ID solver ($solved)")
	rxe_took=$(($(rxe_rcvd_pkts) - before))
	lost=$(($(frames_lost_towards_rxe) - lost_before))
	# Every packet that reached rxe passed its header and ICRC checks (ARP may be among the lost).
	((rxe_took <= ours_on_wire && rxe_took + lost >= ours_on_wire)) ||
		why+=("rxe took $rxe_took of our $ours_on_wire packets ($lost frames lost on the way)")
	local arrow="softrdma → rxe"
	[[ $dir == from-rxe ]] && arrow="rxe → softrdma"
	finish_case "$name" "$pcap" "\`$prog $args\`${runopts:+ under \`$runopts\`}" "$arrow" \
		", $solved rxe packets verified by ID solving, $lost lost towards rxe, $((SECONDS - t)) s" "${why[@]}"
}

# The path MTU is 1024 on both ends (rxe's active_mtu; softrdma's default): 4096-byte
# messages take 4 packets, the small ones one.
for dir in to-rxe from-rxe; do
	run_case "$dir.rc_pingpong.4096" "$dir" ibv_rc_pingpong "-n 20 -s 4096"
	run_case "$dir.rc_pingpong.512" "$dir" ibv_rc_pingpong "-n 20 -s 512"
	run_case "$dir.uc_pingpong.4096" "$dir" ibv_uc_pingpong "-n 20 -s 4096"
	run_case "$dir.uc_pingpong.512" "$dir" ibv_uc_pingpong "-n 20 -s 512"
	run_case "$dir.ud_pingpong.512" "$dir" ibv_ud_pingpong "-n 20 -s 512"
	run_case "$dir.send_bw.rc" "$dir" ib_send_bw "-c RC -n 100 -s 4096"
	run_case "$dir.send_bw.rc.small" "$dir" ib_send_bw "-c RC -n 100 -s 256"
	run_case "$dir.send_bw.uc" "$dir" ib_send_bw "-c UC -n 100 -s 4096"
	run_case "$dir.send_bw.ud" "$dir" ib_send_bw "-c UD -n 100 -s 512"
	run_case "$dir.write_bw.rc" "$dir" ib_write_bw "-c RC -n 100 -s 8192"
	run_case "$dir.write_bw.uc" "$dir" ib_write_bw "-c UC -n 100 -s 8192"
	# perftest's default outstanding READs: each side takes the other's max_qp_rd_atom, 128
	# on rxe and on srdma0.
	run_case "$dir.read_bw" "$dir" ib_read_bw "-n 100 -s 8192"
	run_case "$dir.read_lat" "$dir" ib_read_lat "-n 100 -s 8192"
	run_case "$dir.atomic_bw.fetch_add" "$dir" ib_atomic_bw "-n 100 -A FETCH_AND_ADD"
	run_case "$dir.atomic_bw.cmp_swap" "$dir" ib_atomic_bw "-n 100 -A CMP_AND_SWAP"
	run_case "$dir.atomic_lat.fetch_add" "$dir" ib_atomic_lat "-n 100 -A FETCH_AND_ADD"
	# Our packets lost before the wire: rxe answers with NAKs / the timeouts fire, we resend.
	# rc_pingpong's loss hits only our SEND packets (tx.opcode=send), not our ACKs: with ACKs
	# lost too it hung about once in ten runs, in rxe. A lost ACK makes rxe resend its SEND
	# from the first packet; our ACK for its last PSN (the answer to that duplicate) reaches
	# it while the WQE is half resent, and rxe (6.12 rxe_comp.c: COMPST_WRITE_SEND goes to
	# COMPST_UPDATE_COMP, the WQE not being "pending") moves comp.psn past the WQE without
	# completing it, although an ACK acknowledges every packet up to its PSN (s9.7.5.1.2).
	# From then on only another ACK for that PSN completes it: its retry timer sees req.psn
	# == comp.psn and never resends (COMPST_ERROR_RETRY), where a requester must retry until
	# its retry count runs out (s9.7.6.1.3). When our one ACK for the rest of the resend is
	# lost as well, rxe waits for ever, and so do both programs. One more ACK for that PSN,
	# injected by hand into such a hung run, completed rxe's SEND and both programs finished.
	run_case "$dir.rc_pingpong.tx-loss" "$dir" ibv_rc_pingpong "-n 50 -s 4096" "--faults tx.opcode=send,tx.loss=5%,seed=1"
	run_case "$dir.write_bw.tx-loss" "$dir" ib_write_bw "-c RC -n 100 -s 8192" "--faults tx.loss=5%,seed=1"
	run_case "$dir.read_bw.tx-loss" "$dir" ib_read_bw "-n 100 -s 8192" "--faults tx.loss=5%,seed=1"
	# Connected by the RDMA CM: REQ/REP/RTU and DREQ/DREP to and from rxe's QP1.
	run_case "$dir.cm.rping" "$dir" rping "-s -a {server} -v -C 50|-c -a {server} -v -C 50"
	run_case "$dir.cm.ucmatose" "$dir" ucmatose "|-s {server}"
	run_case "$dir.cm.udaddy" "$dir" udaddy "|-s {server}"
	# Our first MAD to QP1 lost: to rxe that is our REQ (resent after the response timeout),
	# from rxe our REP (rxe's CM resends its REQ, and a REQ repeated while we wait for the RTU
	# gets the REP again, IBTA vol. 1 12.9.6).
	run_case "$dir.cm.rping.first_mad_lost" "$dir" rping "-s -a {server} -v -C 10|-c -a {server} -v -C 10" \
		"--faults tx.qp=1,tx.drop=1"
	# perftest -R listens twice on one port (control, then data); our client's data REQ can
	# reach rxe between the two, rxe refuses it (REJ 8, as it must), and perftest's retry path
	# then uses the rdma_cm_ids it has just destroyed and crashes. So with softrdma as the
	# client, its third MAD to QP1 (the data REQ, after the control REQ and RTU) is lost and
	# sent again after the CM response timeout, when rxe listens for it.
	if [[ $dir == from-rxe ]]; then
		run_case "$dir.cm.send_bw" "$dir" ib_send_bw "-R -n 100 -s 4096"
	else
		run_case "$dir.cm.send_bw.data_req_resent" "$dir" ib_send_bw "-R -n 100 -s 4096" "--faults tx.qp=1,tx.drop=3"
	fi
done

# iWARP against Linux siw (guest A's siw0 on eth1, 10.99.1.2; we are 10.99.1.1 on br1): rping's
# protocol spoken by tests/interop/iwarp_rping on the engine's iWARP host against siw's own
# rping, both directions, without MPA CRCs (siw's default) and with them
# asked for by us (siw takes a peer's C bit). Checks: both exit 0, every ping arrived, and the
# capture on br1 passes `softrdma dump --check` (MPA CRCs verified where negotiated) and
# tshark-validate (TCP checksums not judged: the guest's NIC offloads them). With --bad-stag
# the side that reads a missing STag must be answered with the invalid-STag Terminate, and
# the connection ends there.
# Our client waits 100 ms after the connection is up before its first Send: siw as responder
# sends its MPA Reply before it hooks the socket to the QP, and FPDUs arriving in between sit
# unread until more data comes. Under TCG that window is milliseconds wide on a fresh guest, and
# a client that sends at once (ours, 0.2 ms after the Reply) waited 30 s for an answer.
# With --shim the softrdma side is Debian's own rping on srdmaiw0 (softrdma run --iwarp),
# as the server only: as a client it sends at once, into the window above.
run_siw_case() { # run_siw_case NAME DIRECTION [--shim | IWARP_RPING OPTION...]
	local name=$1 dir=$2 why=() t=$SECONDS pings=20
	shift 2
	local opts="$*" ours_server=("$IWARP_RPING") program="iwarp_rping"
	if [[ $opts == --shim ]]; then
		opts="" ours_server=("$SOFTRDMA" run --iwarp --ip 10.99.1.1 -- rping) program="rping on srdmaiw0"
	fi
	[[ $name =~ $ONLY ]] || return 0
	local pcap=$OUT/$name.pcap ours=$OUT/$name.softrdma.log theirs=$OUT/$name.siw.log rc_ours=0
	local rping_args="-v -C $pings -S 100"
	capture_start "$pcap" br1 "tcp port 7174"
	if [[ $dir == to-siw ]]; then
		guest "bgrun $name sh -c 'rping -s -a 10.99.1.2 $rping_args; echo exit=\$?'; sleep 2" >/dev/null
		timeout 60 ip netns exec "$NS" "$IWARP_RPING" -c -a 10.99.1.2 -b 10.99.1.1 --settle 100 $rping_args $opts >"$ours" 2>&1 || rc_ours=$?
		guest_server_log "$name" rping >"$theirs" 2>&1
	else
		timeout 60 ip netns exec "$NS" "${ours_server[@]}" -s -a 10.99.1.1 $rping_args $opts >"$ours" 2>&1 &
		local ours_pid=$!
		sleep 1
		guest "timeout 50 rping -c -a 10.99.1.1 $rping_args; echo exit=\$?" 60 >"$theirs" 2>&1
		wait "$ours_pid" || rc_ours=$?
	fi
	capture_stop "$pcap"
	((rc_ours == 0)) || why+=("softrdma side exited $rc_ours")
	"$SOFTRDMA" dump --check "$pcap" >"$OUT/$name.dump.log" 2>&1 || why+=("dump --check failed")
	if [[ $opts == *--bad-stag* ]]; then
		# Whoever names the missing STag hears of it: the side that reads it (siw's Read of our
		# advertised buffer, or ours of siw's) gets the other's Terminate, RDMAP layer 0, remote
		# protection error 1, invalid STag 0x00 (RFC 5040 s7.4).
		local from=10.99.1.1
		[[ $dir == from-siw ]] && from=10.99.1.2
		grep -q "src=$from:[0-9]* .*op=TERMINATE .*layer=0 etype=1 ecode=0x00" "$OUT/$name.dump.log" ||
			why+=("no invalid-STag Terminate from $from")
	else
		grep -q '^exit=0' "$theirs" || why+=("siw side failed")
		local client_log=$ours got
		[[ $dir == from-siw ]] && client_log=$theirs
		got=$(grep -c '^ping data: rdma-ping-' "$client_log")
		((got == pings)) || why+=("$got of $pings pings")
	fi
	if [[ $opts == *--crc* ]] && ! grep -q 'mpa_crc_ok=[1-9]' "$OUT/$name.dump.log"; then why+=("no FPDU carried a CRC"); fi
	tshark_in_background "$name" "$pcap" TSHARK_TCP_CHECKSUM=FALSE
	local arrow="softrdma → siw"
	[[ $dir == from-siw ]] && arrow="siw → softrdma"
	finish_case "$name" "$pcap" "rping protocol (\`$program${opts:+ $opts}\`)" "$arrow" ", $((SECONDS - t)) s" "${why[@]}"
}

for dir in to-siw from-siw; do
	run_siw_case "$dir.iwarp.rping" "$dir"
	run_siw_case "$dir.iwarp.rping.crc" "$dir" --crc
	run_siw_case "$dir.iwarp.terminate.bad_stag" "$dir" --bad-stag
done
run_siw_case "from-siw.iwarp.rping.shim" from-siw --shim

# perftest -R's server listens on its port twice, for the TCP exchange and then for the RDMA
# CM; our client's connection can reach siw between the two and be refused (REJECTED, -111),
# after which perftest's retry path reuses the IDs it has just destroyed. Such a run is started
# again, the server first, a few times.
refused_before_listen() { grep -q 'RDMA_CM_EVENT_REJECTED' "$1"; }

# siw as responder sends its MPA Reply before it hooks the socket to the QP (see run_siw_case):
# FPDUs that arrive in between sit in the socket's receive queue until more data comes. Seen
# from here as a siw socket on PORT whose receive queue holds the same bytes for two seconds.
wait_unless_siw_left_unread() { # wait_unless_siw_left_unread PID: PID's status; PID is ended
	local pid=$1 last="" now same=0 rc=0
	while kill -0 "$pid" 2>/dev/null; do
		sleep 1
		# /proc/net/tcp: local address, remote address, state (01 established), tx:rx queues
		now=$(guest "awk '\$2 ~ /:$(printf %04X "$PORT")\$/ && \$4 == \"01\" && \$5 !~ /:00000000\$/ {print \$3, \$5}' /proc/net/tcp" 10)
		if [[ -n $now && $now == "$last" ]]; then same=$((same + 1)); else same=0; fi
		last=$now
		if ((same >= 2)); then
			PEER_RACE="siw left our FPDUs unread in its socket, its accept race: $now"
			kill "$pid" 2>/dev/null
			break
		fi
	done
	wait "$pid" || rc=$?
	return $rc
}

# perftest closes with an exchange of Sends; our side exits 0 only after receiving siw's. When
# our close (FIN) reaches siw before siw has retired that Send, siw completes it with status 2
# (local QP operation error), and perftest, server or client, says it could not write.
siw_failed_delivered_send() { # siw_failed_delivered_send SIW_LOG OUR_STATUS SIW_STATUS
	(($2 == 0 && $3 != 0)) && grep -q 'Bad wc status 2' "$1" &&
		grep -Eq 'Unable to write (from|to) socket/rdma_cm' "$1" &&
		PEER_RACE="siw failed its last Send after we received it, its teardown race"
	return 0
}

# perftest -R between Debian's perftest on srdmaiw0 (softrdma run --iwarp) and on siw0, each
# exchange captured and checked as the rping cases are, both programs printing their result
# row; with CRC our side asks for MPA CRCs (--mpa-crc: siw 6.12 has its CRC choices as
# compile-time constants, so only the peer can ask) and every FPDU must carry a good one.
# Both directions. A failing case runs once more, as run_case's do: the emulated guest's
# perftest now and then cannot time itself ("Can't produce a report"). Two failures are siw's
# own races under TCG and run again (retried, PEER_RACE): with siw as server, perftest's client
# sends its parameters at once, into the accept window above (wait_unless_siw_left_unread);
# and siw's server can report its last Send failed when our client, having received it, closes
# before siw completes it (siw_failed_delivered_send).
run_siw_perftest() { # run_siw_perftest NAME DIRECTION PROGRAM "ARGS" [crc]
	local name=$1 dir=$2 prog=$3 args=$4 crc=${5:-} why=() t=$SECONDS rc_ours=0 rc_theirs=0
	[[ $name =~ $ONLY ]] || return 0
	local pcap=$OUT/$name.pcap ours=$OUT/$name.softrdma.log theirs=$OUT/$name.siw.log
	local ours_cmd=("$SOFTRDMA" run --iwarp ${crc:+--mpa-crc} --ip 10.99.1.1 -- "$prog" -R -d srdmaiw0 $args)
	capture_start "$pcap" br1 "tcp port $PORT"
	if [[ $dir == to-siw ]]; then
		local attempt
		for attempt in 1 2 3 4; do
			guest "bgrun $name sh -c '$prog -R -d siw0 $args; echo exit=\$?'; waitport $PORT" >/dev/null
			rc_ours=0
			timeout 90 ip netns exec "$NS" "${ours_cmd[@]}" 10.99.1.2 >"$ours" 2>&1 &
			wait_unless_siw_left_unread $! || rc_ours=$?
			refused_before_listen "$ours" || break
			log "$name: siw refused our connection before its server listened (attempt $attempt)"
			guest "killall -9 $prog; sleep 0.5" >/dev/null
		done
		# siw's server waits for the FPDUs it left unread: no use waiting for its exit line
		[[ -z $PEER_RACE ]] || guest "killall -9 $prog" >/dev/null
		guest_server_log "$name" $prog >"$theirs" 2>&1
		grep -q '^exit=0' "$theirs" || rc_theirs=1
	else
		timeout 120 ip netns exec "$NS" "${ours_cmd[@]}" >"$ours" 2>&1 &
		local ours_pid=$!
		if wait_host_port; then
			guest "timeout 90 $prog -R -d siw0 $args 10.99.1.1" 100 >"$theirs" 2>&1 || rc_theirs=$?
		else
			rc_theirs=124
		fi
		wait "$ours_pid" || rc_ours=$?
	fi
	siw_failed_delivered_send "$theirs" $rc_ours $rc_theirs
	capture_stop "$pcap"
	((rc_ours == 0)) || why+=("softrdma side exited $rc_ours")
	((rc_theirs == 0)) || why+=("siw side failed")
	local log
	for log in "$ours" "$theirs"; do
		grep -Eq "^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+" "$log" || why+=("no result row in $(basename "$log")")
	done
	"$SOFTRDMA" dump --check "$pcap" >"$OUT/$name.dump.log" 2>&1 || why+=("dump --check failed")
	if [[ -n $crc ]] && ! grep -q 'mpa_crc_ok=[1-9]' "$OUT/$name.dump.log"; then why+=("no FPDU carried a CRC"); fi
	tshark_in_background "$name" "$pcap" TSHARK_TCP_CHECKSUM=FALSE
	local arrow="softrdma → siw"
	[[ $dir == from-siw ]] && arrow="siw → softrdma"
	finish_case "$name" "$pcap" "\`$prog -R $args\`${crc:+ (MPA CRCs asked for by softrdma)}" "$arrow" \
		", $((SECONDS - t)) s" "${why[@]}"
}

for dir in to-siw from-siw; do
	for crc in "" crc; do
		retried run_siw_perftest "$dir.iwarp.write_bw${crc:+.crc}" "$dir" ib_write_bw "-n 100 -s 65536" $crc
		retried run_siw_perftest "$dir.iwarp.read_bw${crc:+.crc}" "$dir" ib_read_bw "-n 100 -s 65536" $crc
		retried run_siw_perftest "$dir.iwarp.send_bw${crc:+.crc}" "$dir" ib_send_bw "-n 100 -s 65536" $crc
	done
done

tshark_verdicts
{
	echo "| program | direction | result | packets |"
	echo "|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
} >"$OUT/matrix.md"
log "${#ROWS[@]} cases, $FAILS failed, $((SECONDS - T0)) s; matrix in $OUT/matrix.md"
((FAILS == 0))

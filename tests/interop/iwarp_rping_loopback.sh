#!/bin/bash
# iwarp_rping against itself on loopback (127.83.92.1 and .2), with and without MPA CRCs: both
# exit 0, the client printed every ping, and the client's capture of the connection passes
# `softrdma dump --check` (MPA CRCs verified where negotiated) and, where tshark is installed,
# decodes as iWARP without a malformed frame.
set -euo pipefail
RPING=${1:?usage: iwarp_rping_loopback.sh IWARP_RPING SOFTRDMA}
SOFTRDMA=${2:?usage: iwarp_rping_loopback.sh IWARP_RPING SOFTRDMA}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# tshark's TCP heuristics first: a port some dissector claims (17500 is Dropbox's LAN sync)
# would otherwise hide the MPA stream from iwarp_mpa_tcp.
TSHARK=(tshark -o tcp.try_heuristic_first:TRUE --enable-heuristic iwarp_mpa_tcp --disable-protocol rpcordma)
for crc in "" --crc; do
	while port=$((17200 + RANDOM % 500)) && [[ -n $(ss -Hltn "sport = :$port") ]]; do :; done
	"$RPING" -s -a 127.83.92.1 -p "$port" -S 100 -v $crc >"$work/server.log" 2>&1 &
	server=$!
	for _ in $(seq 100); do [[ -n $(ss -Hltn "sport = :$port") ]] && break; sleep 0.05; done
	out=$("$RPING" -c -a 127.83.92.1 -b 127.83.92.2 -p "$port" -C 25 -S 100 -v $crc --capture "$work/c.pcap") ||
		{ echo "the client failed on port $port (crc '${crc}'):"; echo "$out"; cat "$work/server.log"; exit 1; }
	wait "$server" || { echo "the server failed on port $port (crc '${crc}'):"; cat "$work/server.log"; exit 1; }
	pings=$(grep -c '^ping data: rdma-ping-' <<<"$out")
	[[ $pings == 25 ]] || { echo "client printed $pings pings of 25 (crc '${crc}')"; echo "$out"; exit 1; }
	grep -q 'server DISCONNECT EVENT' "$work/server.log" || { cat "$work/server.log"; exit 1; }
	"$SOFTRDMA" dump --check "$work/c.pcap" >"$work/dump.log" || { tail -n 5 "$work/dump.log"; exit 1; }
	summary=$(tail -n 1 "$work/dump.log")
	# 25 pings: 4 Sends, a Read Request and its Response, a Write each way and back (100 FPDUs).
	[[ $summary =~ iwarp=([0-9]+) ]] && ((BASH_REMATCH[1] >= 100)) || { echo "dump saw too few iWARP frames: $summary"; exit 1; }
	if [[ -n $crc ]]; then [[ $summary =~ mpa_crc_ok=[1-9] ]] || { echo "no FPDU carried a CRC: $summary"; exit 1; }; fi
	if command -v tshark >/dev/null; then
		bad=$("${TSHARK[@]}" -r "$work/c.pcap" -o tcp.check_checksum:TRUE -o ip.check_checksum:TRUE \
			-Y '_ws.malformed || _ws.expert.severity >= error' 2>/dev/null | wc -l)
		((bad == 0)) || { echo "tshark: $bad malformed or erroneous frames (port $port)"; exit 1; }
		rdmap=$("${TSHARK[@]}" -r "$work/c.pcap" -Y iwarp_rdma 2>/dev/null | wc -l)
		((rdmap > 0)) || { echo "tshark decoded no RDMAP (port $port)"; exit 1; }
	fi
	echo "iwarp_rping loopback ${crc:-without CRCs}: 25 pings, capture checked ($summary)"
done

#!/bin/bash
# iwarp_rping against itself on loopback (127.83.92.1 and .2), with and without MPA CRCs:
# both exit 0 and the client printed every ping.
set -euo pipefail
RPING=${1:?usage: iwarp_rping_loopback.sh IWARP_RPING}
for crc in "" --crc; do
	port=$((17200 + RANDOM % 500))
	"$RPING" -s -a 127.83.92.1 -p "$port" -S 100 -v $crc >/tmp/iwarp_rping_server.$$ 2>&1 &
	server=$!
	sleep 0.3
	out=$("$RPING" -c -a 127.83.92.1 -b 127.83.92.2 -p "$port" -C 25 -S 100 -v $crc)
	wait "$server"
	pings=$(grep -c '^ping data: rdma-ping-' <<<"$out")
	[[ $pings == 25 ]] || { echo "client printed $pings pings of 25 (crc '${crc}')"; echo "$out"; exit 1; }
	grep -q 'server DISCONNECT EVENT' /tmp/iwarp_rping_server.$$ || { cat /tmp/iwarp_rping_server.$$; exit 1; }
	echo "iwarp_rping loopback ${crc:-without CRCs}: 25 pings"
done
rm -f /tmp/iwarp_rping_server.$$

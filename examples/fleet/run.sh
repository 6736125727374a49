#!/usr/bin/env bash
# One rate across machines, on one machine: a Redis of its own on a loopback port,
# three sluiced daemons standing for three machines (each its own segment, control
# socket and name in the fleet), and curl on each sending to a receiver whose
# limit, 20/s, is for all of them together (fleet.ini).  Machines 1 and 2 send from
# the start; machine 3 joins 4 s in.  Prints what the receiver saw each second,
# machine by machine: two halves, then three thirds, 20/s in all throughout.
#
#   examples/fleet/run.sh [BUILD_DIR]        (make first; needs redis-server)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "$ROOT/${1:-build}" && pwd)
command -v redis-server >/dev/null || { echo "needs redis-server (scripts/deps.sh installs it)" >&2; exit 1; }
T=$(mktemp -d /tmp/sluice-fleet.XXXXXX)
pids=()
cleanup() {
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	for n in 1 2 3; do python3 "$ROOT/tests/integration/helpers/segment.py" remove "$T/sluice-fleet-$$-$n.segment"; done
	rm -rf "$T"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

redis=$(free_port)
redis-server --port "$redis" --bind 127.0.0.1 --save "" --appendonly no --logfile "$T/redis.log" &
pids+=($!)
python3 "$ROOT/tests/integration/helpers/server.py" --port-file "$T/port" --log "$T/arrivals" --lifetime 60 \
	--also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3 &
pids+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && redis-cli -p "$redis" ping >/dev/null 2>&1 && break; sleep 0.1; done
port=$(cat "$T/port")

for n in 1 2 3; do
	sed -e "s|@SHM@|/sluice-fleet-$$-$n|" -e "s|@SOCKET@|$T/ctl-$n.sock|" -e "s|@MACHINE@|machine-$n|" \
		-e "s|@REDIS@|$redis|" -e "s|@PORT@|$port|" "$HERE/fleet.ini" >"$T/m$n.ini"
	"$BUILD/sluiced" -f -c "$T/m$n.ini" 2>>"$T/sluiced-$n.log" &
	pids+=($!)
done
for n in 1 2 3; do
	for _ in $(seq 50); do [ -S "$T/ctl-$n.sock" ] && break; sleep 0.1; done
done
"$BUILD/sluice" check --redis -c "$T/m1.ini" | tail -1
sleep 2.5 # a Redis that starts empty grants nothing new for two lease lives

# machine N sends with 3 curl loops for SECONDS, starting AFTER seconds in.
send() {
	local n=$1 secs=$2 after=$3
	sleep "$after"
	SLUICE_LIB="$BUILD/libsluice.so" timeout $((secs + 30)) "$BUILD/sluice" run -c "$T/m$n.ini" -- bash -c '
		end=$((SECONDS + $3))
		for loop in 1 2 3; do
			( while [ $SECONDS -lt $end ]; do curl -s -o /dev/null "http://127.0.1.$1:$2/machine$1"; done ) &
		done
		wait' _ "$n" "$port" "$secs"
}
echo "fleet limit 20/s; machines 1 and 2 send from 0 s, machine 3 from 4 s (12 s in all)"
start=$(python3 -c 'import time; print(time.monotonic_ns())')
send 1 12 0 & s1=$!
send 2 12 0 & s2=$!
send 3 8 4 & s3=$!
wait $s1 $s2 $s3

python3 - "$T/arrivals" "$start" <<'PY'
import sys
t0 = int(sys.argv[2])
per = {}
for line in open(sys.argv[1]):
    ns, path = line.split()[:2]
    s = (int(ns) - t0) // 1_000_000_000
    m = path.strip("/")
    per.setdefault(s, {}).setdefault(m, 0)
    per[s][m] += 1
print("  second  machine1  machine2  machine3  total")
for s in sorted(per):
    row = per[s]
    print("  %6d  %8d  %8d  %8d  %5d" % (s, row.get("machine1", 0), row.get("machine2", 0),
                                          row.get("machine3", 0), sum(row.values())))
PY
echo
"$BUILD/sluice" stat -c "$T/m3.ini"

#!/usr/bin/env bash
# bench/pictures.sh OUT_DIR: the README's two pictures of arrivals against the
# schedule (scripts/plot_releases.py), from the destination's kernel timestamps:
#   demo.png           make run's demo: 4 curl processes, one queue at 5/s;
#   four-programs.png  curl, wget, python3 and node, 25 requests each, sharing
#                      one queue at 20/s through a running sluiced.
# Prints one line of figures per picture.  Needs root (the SYN witness).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$ROOT/${BUILD:-build}" && pwd)
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
H="$ROOT/tests/integration/helpers"
T=$(mktemp -d /tmp/sluice-pictures.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

PLOT="$OUT/demo.png" "$ROOT/examples/demo.sh" "${BUILD:-build}" | tail -1

python3 "$H/server.py" --port-file "$T/port" --log "$T/arrivals" --lifetime 120 &
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")
python3 "$H/syn_witness.py" --port "$port" --out "$T/syns" --ready-file "$T/ready" --lifetime 100 &
for _ in $(seq 100); do [ -s "$T/ready" ] && break; sleep 0.1; done
cat >"$T/four.ini" <<EOF
[sluice]
shm_name = /sluice-pictures-$$
control_socket = $T/ctl.sock

[four-programs]
match = 127.0.0.1:$port
rate = 20/s
max_wait = 1m
EOF
"$B/sluiced" -f -c "$T/four.ini" 2>"$T/sluiced.log" &
daemon=$!
for _ in $(seq 50); do "$B/sluice" stat -c "$T/four.ini" >/dev/null 2>&1 && break; sleep 0.1; done
url="http://127.0.0.1:$port"
run() { SLUICE_LIB="$B/libsluice.so" "$B/sluice" run -c "$T/four.ini" -- "$@"; }
pids=()
run sh -c 'for i in $(seq 25); do curl -s -o /dev/null "$1/curl/$i"; done' _ "$url" &
pids+=($!)
run sh -c 'for i in $(seq 25); do wget -q -O /dev/null "$1/wget/$i"; done' _ "$url" &
pids+=($!)
run python3 "$H/fetch.py" "$url/python3/x" 25 >/dev/null &
pids+=($!)
run node -e '
	const http = require("http");
	(async () => {
		for (let i = 0; i < 25; i++)
			await new Promise((ok, no) => http.get(process.argv[1] + "/node/" + i,
				{agent: false}, r => { r.resume(); r.on("end", ok); }).on("error", no));
	})();' "$url" &
pids+=($!)
wait "${pids[@]}"
sleep 0.3
kill "$daemon"
wait "$daemon" 2>/dev/null || true
python3 "$H/segment.py" remove "$T/sluice-pictures-$$.segment" 2>/dev/null || true
python3 "$ROOT/scripts/plot_releases.py" --arrivals "$T/arrivals" --syns "$T/syns" --interval-ms 50 \
	--title "curl, wget, python3 and node sharing one queue at 20/s" --out "$OUT/four-programs.png"

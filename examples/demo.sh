#!/usr/bin/env bash
# The demo of `make run`: a local HTTP receiver, then 4 processes sending 10
# requests each with curl under `sluice run` at 5/s (conf/demo.ini).  Prints every
# request's arrival at the receiver, so the fixed-rate release is visible, then a
# summary and the queue's statistics.  Takes about 8 seconds.  With PLOT=FILE.png
# (make run PLOT=...), also draws the arrivals against the schedule there
# (scripts/plot_releases.py, gnuplot).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$ROOT/${1:-build}" && pwd)
T=$(mktemp -d /tmp/sluice-demo.XXXXXX)
witness=
trap 'kill $server $witness 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT

python3 "$ROOT/tests/integration/helpers/server.py" --port-file "$T/port" --log "$T/arrivals" --lifetime 120 &
server=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")
# With root (a packet socket on lo), also the kernel's own receive times of the
# connections' SYNs: the exact witness of the rate, free of the receiver's
# scheduling.  Without, the receiver's times are all there is.
python3 "$ROOT/tests/integration/helpers/syn_witness.py" --port "$port" --out "$T/syns" \
	--ready-file "$T/witness.ready" --lifetime 60 2>/dev/null &
witness=$!
for _ in $(seq 30); do
	[ -s "$T/witness.ready" ] && break
	kill -0 $witness 2>/dev/null || break # no packet socket: not root
	sleep 0.1
done

echo "sluice demo: 4 processes x 10 curl requests to a receiver on 127.0.0.1:$port"
echo "config: conf/demo.ini (one queue, 5 per second, burst 1)"
echo
start=$(python3 -c 'import time; print(time.monotonic_ns())')
SLUICE_LIB="$BUILD/libsluice.so" "$BUILD/sluice" run -c "$ROOT/conf/demo.ini" -- bash -c '
	for p in 1 2 3 4; do
		( for r in $(seq 10); do curl -s -o /dev/null "http://127.0.0.1:$1/proc$p/req$r" || echo "request failed"; done ) &
	done
	wait
	# While the queue still exists: its statistics, read straight from the segment.
	"$2/sluice" stat --segment "$SLUICE_SEGMENT"
' _ "$port" "$BUILD" >"$T/stat"

python3 - "$T/arrivals" "$start" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
t0 = int(sys.argv[2])
rows.sort(key=lambda r: int(r[0]))
print("  arrival    gap      from")
prev = None
for ns, path in rows:
    ns = int(ns)
    gap = "" if prev is None else "%6.1fms" % ((ns - prev) / 1e6)
    _, proc, req = path.split("/")
    print("  %7.3fs  %-8s %s %s" % ((ns - t0) / 1e9, gap, proc, req))
    prev = ns
times = [int(r[0]) for r in rows]
span = (times[-1] - times[0]) / 1e9
gaps = [(b - a) / 1e6 for a, b in zip(times, times[1:])]
print()
print("%d requests from 4 processes in %.2fs: %.2f per second (configured 5/s)"
      % (len(times), span, (len(times) - 1) / span))
print("gap between consecutive requests: min %.1fms, max %.1fms (interval 200ms),"
      % (min(gaps), max(gaps)))
print("  as the receiver timed them after its own wake-ups")
PY
if [ -s "$T/syns" ]; then
	sleep 0.2
	python3 - "$T/syns" <<'PY'
import sys
t = sorted(int(l.split()[0]) for l in open(sys.argv[1]) if l.strip())
gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:])]
print("the kernel saw %d connections (SYNs) arrive: gap min %.3fms, max %.1fms" % (len(t), min(gaps), max(gaps)))
PY
fi
echo
cat "$T/stat"
if [ -n "${PLOT:-}" ]; then
	echo
	python3 "$ROOT/scripts/plot_releases.py" --arrivals "$T/arrivals" --syns "$T/syns" --interval-ms 200 \
		--title "make run: 4 curl processes, one queue at 5/s" --out "$PLOT"
fi

#!/usr/bin/env bash
# tier: parallel
# The picture of arrivals against the schedule: `make run PLOT=FILE` (the demo)
# writes a PNG drawn from the destination's kernel timestamps, and the table it
# plots holds every request with its gap to the one before; plot_releases.py
# refuses a record it cannot draw, saying why.
. "$(dirname "$0")/lib.sh"

out=$(PLOT="$T/demo.png" "$ROOT/examples/demo.sh" "${BUILD:-build}" 2>&1) || fail "demo: $out"
last=$(echo "$out" | tail -1)
case "$last" in
"$T/demo.png: 40 requests from 4 senders in "*"(kernel SYN timestamps)") ;;
*) fail "the demo's picture line: $last" ;;
esac
python3 - "$T/demo.png" <<'PY' || fail "demo.png is not the PNG it should be"
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", "not a PNG"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (960, 680), (w, h)
assert len(b) > 10000, "an empty picture: %d bytes" % len(b)
PY

# The plotted table, from a record made here: the gaps it draws are the record's.
start_server
start_witness syn "$PORT" "$T/syns"
write_config "$T/p.ini" <<EOF
[p]
match = 127.0.0.1:$PORT
rate = 10/s
EOF
"$SLUICE" run -c "$T/p.ini" -- sh -c 'for i in 1 2 3 4 5 6; do curl -s -o /dev/null "http://127.0.0.1:$1/one/$i" || exit 1; done' \
	_ "$PORT" || fail "curl under sluice run"
sleep 0.3
python3 "$ROOT/scripts/plot_releases.py" --arrivals "$SERVER_LOG" --syns "$T/syns" --interval-ms 100 \
	--out "$T/p.png" --data "$T/p.data" >"$T/p.out" || fail "plot_releases: $(cat "$T/p.out")"
python3 - "$T/p.data" "$T/syns" <<'PY' || fail "the plotted table is not the record"
import sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("#")]
syns = sorted(int(l.split()[0]) for l in open(sys.argv[2]))
assert len(rows) == 6 == len(syns), (len(rows), len(syns))
assert all(r[0] == "one" for r in rows), rows
for k in range(1, 6):
    gap_less = (syns[k] - syns[k - 1] - 100e6) / 1e6
    assert abs(float(rows[k][3]) - gap_less) < 0.002, (k, rows[k], gap_less)
    assert float(rows[k][3]) >= 0, "a gap under the interval: %s" % rows[k]
PY
echo "1 /x" >"$T/one"
python3 "$ROOT/scripts/plot_releases.py" --arrivals "$T/one" --interval-ms 100 --out "$T/x.png" 2>"$T/x.err" &&
	fail "one arrival was drawn"
grep -q "fewer than two arrivals" "$T/x.err" || fail "one arrival: $(cat "$T/x.err")"
[ ! -e "$T/x.png" ] || fail "a picture of one arrival"

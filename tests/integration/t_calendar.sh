#!/usr/bin/env bash
# tier: parallel
# Calendar windows (docs/config.md, "Calendar windows"): rate = 2/mo with
# strategy = fixed-window, the daemon's wall clock (libfaketime, its monotonic
# clock left alone) six seconds before 2026-02-01 00:00 UTC.  Through the real
# shim: two connects go at once, the third is held to the month's end - at the
# destination not one before it - the fourth goes in February's window with it,
# and the fifth, a month away, is refused at once (max_wait 20 s).  A 30-day
# window would have ended at neither.  Then stat, its JSON and the metrics say
# the window is used up until 2026-03-01 00:00 UTC.
. "$(dirname "$0")/lib.sh"

FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -e "$FT" ] || FT=$(find /usr/lib -name libfaketime.so.1 | head -1)
[ -n "$FT" ] && [ -e "$FT" ] || fail "libfaketime is missing (scripts/deps.sh installs faketime)"
python3 "$HELPERS/sink.py" "$T/port" 120 &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
write_config "$T/c.ini" <<EOF2
[month]
match = 127.0.0.1:$PORT
rate = 2/mo
strategy = fixed-window
max_wait = 20s
EOF2
"$SLUICE" check -c "$T/c.ini" | grep -q "2/mo" || fail "sluice check does not write the rate back as 2/mo"
start_syn_witness "$PORT" "$T/syns"
# The month ends LEAD seconds after the daemon starts (its fake clock starts then).
LEAD=6
launch=$(date +%s%N)
echo "@$(date -u -d "2026-02-01 00:00:00 UTC - $LEAD seconds" '+%Y-%m-%d %H:%M:%S')" >"$T/faketime"
TZ=UTC LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$T/faketime" DONT_FAKE_MONOTONIC=1 \
	"$SLUICED" -f -c "$T/c.ini" 2>>"$T/sluiced.log" &
DAEMON_PID=$!
BG_PIDS+=($DAEMON_PID)
for _ in $(seq 100); do
	"$SLUICE" stat -c "$T/c.ini" >/dev/null 2>&1 && break
	sleep 0.1
done
boundary=$((launch + LEAD * 1000000000))
[ "$(date +%s%N)" -lt $((boundary - 3000000000)) ] || fail "the daemon took too long to start for this test"

LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$PORT" >"$T/client.out" 2>&1 <<'EOF2'
import socket, sys, time
for i in range(5):
    t0 = time.monotonic()
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()
        print("%.0f" % ((time.monotonic() - t0) * 1000))
    except ConnectionRefusedError:
        print("refused %.0f" % ((time.monotonic() - t0) * 1000))
EOF2
note "waits (ms): $(tr '\n' ' ' <"$T/client.out")"
sleep 0.3
mapfile -t waits <"$T/client.out"
[ "${#waits[@]}" -eq 5 ] || fail "the client did not make five connects: $(cat "$T/client.out")"
[ "${waits[0]}" -lt 1000 ] && [ "${waits[1]}" -lt 1000 ] || fail "the month's two did not go at once"
[ "${waits[2]}" -ge 1000 ] && [ "${waits[2]}" -lt 9000 ] || fail "the third was not held to the month's end"
[ "${waits[3]}" -lt 1000 ] || fail "the fourth did not go in February's window with the third"
case "${waits[4]}" in refused*) ;; *) fail "the fifth, a month away, was not refused: ${waits[4]}" ;; esac
mapfile -t syns < <(awk '{ print $1 }' "$T/syns")
[ "${#syns[@]}" -eq 4 ] || fail "the destination saw ${#syns[@]} connects, not 4"
[ "${syns[1]}" -lt "$boundary" ] || fail "the second arrived after the month's end"
[ "${syns[2]}" -ge "$boundary" ] || fail "the third arrived $(((boundary - syns[2]) / 1000000)) ms before the month's end"
[ "${syns[2]}" -lt $((boundary + 3000000000)) ] || fail "the third came more than 3 s after the month's end"
# What stat says of the window: all of February's used, and when March begins.
"$SLUICE" stat -c "$T/c.ini" >"$T/stat.txt"
note "$(grep -E "month|window:" "$T/stat.txt")"
grep -q "2/mo" "$T/stat.txt" || fail "sluice stat does not show the rate as 2/mo"
grep -qE "window: 2 of 2 used, 0 left, resets in 2[78]d [0-9]+h \(2026-03-01T00:00:00Z\)" "$T/stat.txt" ||
	fail "sluice stat does not say February's window is used up until March"
"$SLUICE" stat -c "$T/c.ini" --json >"$T/stat.json"
python3 - "$T/stat.json" <<'EOF2' || fail "sluice stat --json: the window's figures are wrong: $(cat "$T/stat.json")"
import json, sys
w = json.load(open(sys.argv[1]))["sections"][0]["window"]
assert w["used"] == 2 and w["left"] == 0 and w["resets_at"] == "2026-03-01T00:00:00Z", w
assert 27 * 86400 * 1000 < w["resets_in_ms"] <= 28 * 86400 * 1000, w
EOF2
"$SLUICE" stat -c "$T/c.ini" --prometheus >"$T/metrics"
grep -q '^sluice_window_remaining{section="month"} 0$' "$T/metrics" || fail "no sluice_window_remaining of 0"
awk '$1 == "sluice_window_reset_seconds{section=\"month\"}" && $2 > 27 * 86400 && $2 <= 28 * 86400 { f = 1 }
	END { exit !f }' "$T/metrics" || fail "sluice_window_reset_seconds is not February's rest"
echo ok

#!/usr/bin/env bash
# tier: serial
# A step of the wall clock (docs/guarantees.md "Crash safety"): a fixed window aligned to UTC,
# 10 per 2 s, with max_wait 3 s, while the daemon's wall clock steps an hour
# ahead, back, and an hour behind (libfaketime, its monotonic clock left alone).
# At the destination, no window of the real clock holds more than 10; no caller
# waits past its max_wait (and its grace); the daemon says the windows followed
# the clock, and never that a state lay further ahead than any admission puts it.
# Then a state scribbled far ahead in a section that waits for ever: repaired,
# and not one call refused.
. "$(dirname "$0")/lib.sh"

FT=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1
[ -e "$FT" ] || FT=$(find /usr/lib -name libfaketime.so.1 | head -1)
[ -n "$FT" ] && [ -e "$FT" ] || fail "libfaketime is missing (scripts/deps.sh installs faketime)"
python3 "$HELPERS/sink.py" "$T/port" 200 &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
write_config "$T/w.ini" <<EOF
[window]
match = 127.0.0.1:$PORT
rate = 10/2s
strategy = fixed-window
max_wait = 3s
EOF
echo "+0" >"$T/faketime"
LD_PRELOAD="$FT" FAKETIME_TIMESTAMP_FILE="$T/faketime" FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 \
	"$SLUICED" -f -c "$T/w.ini" 2>>"$T/sluiced.log" &
DAEMON_PID=$!
BG_PIDS+=($DAEMON_PID)
for _ in $(seq 100); do
	"$SLUICE" stat -c "$T/w.ini" >/dev/null 2>&1 && break
	sleep 0.1
done
start_syn_witness "$PORT" "$T/syns"

# Six clients connecting as fast as they are let for 9 s; each connect's wait
# is printed (ms), and refusals (a wait past max_wait) as "refused".
for c in $(seq 6); do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 40 python3 - "$PORT" >"$T/client-$c.out" 2>&1 <<'EOF' &
import socket, sys, time
end = time.monotonic() + 9
while time.monotonic() < end:
    t0 = time.monotonic()
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()
        print("%.0f" % ((time.monotonic() - t0) * 1000))
    except ConnectionRefusedError:
        print("refused %.0f" % ((time.monotonic() - t0) * 1000))
EOF
	BG_PIDS+=($!)
	pids+=($!)
done
for step in "+3600" "+0" "-3600"; do
	sleep 2
	echo "$step" >"$T/faketime"
done
wait "${pids[@]}"
sleep 0.3
python3 "$HELPERS/windows.py" "$T/syns" --strategy fixed --amount 10 --window-ms 2000 ||
	fail "a window of the real clock held more than 10 across the steps"
cat "$T"/client-*.out | python3 -c '
import sys
waits = [float(l.split()[-1]) for l in sys.stdin if l.strip()]
print("  %d calls, the longest wait %.0f ms (max_wait 3000 ms)" % (len(waits), max(waits)))
sys.exit(0 if max(waits) <= 3000 + 100 + 300 + 200 else 1)' || fail "a caller waited past max_wait across the steps"
grep -q "the wall clock stepped +3600" "$T/sluiced.log" || fail "the daemon did not follow the step: $(cat "$T/sluiced.log")"
! grep -q "further ahead than any admission" "$T/sluiced.log" || fail "a step was taken for a scribble: $(cat "$T/sluiced.log")"

# A section that waits for ever, its state scribbled 2^61 ns ahead: repaired by
# the next caller, and no caller refused for it.
write_config "$T/f.ini" <<EOF
[forever]
match = 127.0.0.1:$PORT
rate = 20/s
max_wait = forever
EOF
kill "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null
start_daemon "$T/f.ini"
connect() {
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20).close()' "$PORT"
}
connect || fail "the first connect"
"$SLUICE" stat -c "$T/f.ini" --json >"$T/f.json"
tat=$(json_field "$T/f.json" forever tat_ns)
python3 - "$SEG" "$tat" <<'EOF' || fail "could not find the tat"
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    data = f.read()
    at = data.find(struct.pack("<q", int(sys.argv[2])), 4096)
    if at < 0:
        sys.exit(1)
    f.seek(at); f.write(struct.pack("<qq", 1 << 61, 1 << 61))  # tat and rel_tat
EOF
fpids=()
for i in $(seq 20); do connect & fpids+=($!); done
failed=0
for p in "${fpids[@]}"; do wait "$p" || failed=$((failed + 1)); done
[ "$failed" -eq 0 ] || fail "$failed of 20 calls failed after the scribble, with max_wait = forever"
"$SLUICE" stat -c "$T/f.ini" --json >"$T/f.json"
[ "$(json_field "$T/f.json" forever refused)" -eq 0 ] || fail "refusals counted: $(json_field "$T/f.json" forever refused)"
[ "$(json_field "$T/f.json" forever repaired)" -ge 1 ] || fail "the scribbled state was not counted as repaired"
echo "ok"

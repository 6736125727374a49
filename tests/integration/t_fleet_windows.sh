#!/usr/bin/env bash
# tier: serial
# Windows and places across machines (issue 11).  Three daemons share:
#   - a fixed window of 300 per 10 s, numbered on Redis's clock: their clients
#     offer 40/s each (120/s in all) for 25 s, and no UTC-aligned 10 s window at
#     the destination holds more than 300 (the kernel's SYN stamps);
#   - concurrency = 6: four processes on each machine keep connections open
#     0.3 s at a time, and never more than 6 are open at once over the three.
. "$(dirname "$0")/fleet_lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.1.3
start_helper hport "$T/hold.port" "hold server" python3 "$HELPERS/sink.py" "$T/hold.port" 240 hold
start_redis
for n in 1 2 3; do
	fleet_config $n "$T/m$n.ini" <<EOF2
[window]
match = 127.0.1.0/24:$PORT
rate = 300/10s
strategy = fixed-window
scope = fleet
max_wait = 30s

[places]
match = 127.0.0.1:$hport
concurrency = 6
scope = fleet
max_wait = 30s
EOF2
	start_machine $n
done
sleep 2.5 # the settling time of an empty Redis
WITNESS_KEY=dst start_syn_witness "$PORT" "$T/syn.log"

# --- the window: 120/s offered against 30/s ---
t0=$(now_ns)
for n in 1 2 3; do offer $n 40 25; done
wait "$O_PID_1" "$O_PID_2" "$O_PID_3"
t1=$(now_ns)
sleep 0.3
python3 "$HELPERS/windows.py" "$T/syn.log" --strategy fixed --amount 300 --window-ms 10000 ||
	fail "a 10 s window held more than 300 across the three machines"
# The whole windows inside the run were used, not starved: 250 of 300 at least.
python3 - "$T/syn.log" "$t0" "$t1" <<'PY' || fail "the fleet left a window's AMOUNT unused"
import sys
rows = [int(l.split()[0]) for l in open(sys.argv[1]) if l.strip()]
t0, t1, w = int(sys.argv[2]), int(sys.argv[3]), 10_000_000_000
full = [k for k in range(t0 // w + 1, t1 // w)]
counts = [sum(1 for r in rows if r // w == k) for k in full]
print("  whole windows: %s" % counts)
sys.exit(0 if counts and min(counts) >= 250 else 1)
PY

# --- places: 12 wanted, 6 shared ---
for n in 1 2 3; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$T/${SHM_NAME#/}-$n.segment" timeout 60 python3 "$HELPERS/hold_clients.py" 127.0.0.1 \
		"$hport" 10 0.3 >"$T/hold-$n.iv" 2>"$T/hold-$n.err" &
	eval "H_PID_$n=\$!"
	BG_PIDS+=($!)
done
wait "$H_PID_1" "$H_PID_2" "$H_PID_3"
for n in 1 2 3; do note "machine $n: $(wc -l <"$T/hold-$n.iv") connections held"; done
cat "$T"/hold-*.iv | python3 "$HELPERS/overlap.py" 6 --at-least 60 --what "connections over three machines" ||
	fail "more than 6 open at once across the machines (or too few made)"
for n in 1 2 3; do
	[ "$(wc -l <"$T/hold-$n.iv")" -ge 10 ] || fail "machine $n was starved of places"
done
echo "ok"

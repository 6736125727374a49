#!/usr/bin/env bash
# tier: serial
# 2,000 processes, each holding a concurrency place in one of 3 sections: all
# counted (the holder table had room for 1,024 (process, section) pairs; past it
# a place could not be recorded, so it was not taken and the connect was refused
# at max_wait), then all given back within a few heartbeats after kill -9.
. "$(dirname "$0")/lib.sh"

N=2000
hold="$BUILD_DIR/bench/hold_open"
[ -x "$hold" ] || fail "$hold is missing (make test builds it)"
ports=()
for i in 1 2 3; do
	start_helper p "$T/sink$i.port" "holding sink $i" python3 "$HELPERS/sink.py" "$T/sink$i.port" 200 hold
	ports+=("$p")
done
write_config "$T/h.ini" <<EOF
[places-1]
match = 127.0.0.1:${ports[0]}
concurrency = 1000
max_wait = 30s

[places-2]
match = 127.0.0.1:${ports[1]}
concurrency = 1000
max_wait = 30s

[places-3]
match = 127.0.0.1:${ports[2]}
concurrency = 1000
max_wait = 30s
EOF
start_daemon "$T/h.ini"

# open_places: the sum of the three sections' open places, from the segment.
open_places() {
	"$SLUICE" stat -c "$T/h.ini" --json | python3 -c '
import json, sys
print(sum(s["open"] for s in json.load(sys.stdin)["sections"]))'
}

pids=()
for i in $(seq 0 $((N - 1))); do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" "$hold" 127.0.0.1 "${ports[$((i % 3))]}" &
	pids+=($!)
done
BG_PIDS+=("${pids[@]}")
for _ in $(seq 600); do
	[ "$(open_places)" -ge "$N" ] && break
	sleep 0.1
done
got=$(open_places)
"$SLUICE" stat -c "$T/h.ini" --json >"$T/s.json"
note "$N processes started: $got places open ($(json_field "$T/s.json" places-1 open), $(json_field "$T/s.json" places-2 open), $(json_field "$T/s.json" places-3 open)); undecided $(json_field "$T/s.json" places-1 undecided)"
[ "$got" -eq "$N" ] || fail "$got of $N places counted"
alive=0
for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
[ "$alive" -eq "$N" ] || fail "only $alive of $N holders are alive (the others' connects failed)"

kill -9 "${pids[@]}" 2>/dev/null
wait "${pids[@]}" 2>/dev/null
start=$(now_ms)
for _ in $(seq 100); do
	[ "$(open_places)" -eq 0 ] && break
	sleep 0.1
done
left=$(open_places)
note "after kill -9 of all $N: $left open after $(($(now_ms) - start)) ms"
[ "$left" -eq 0 ] || fail "$left places still counted 10 s after their holders died"
echo "ok"

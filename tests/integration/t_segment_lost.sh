#!/usr/bin/env bash
# tier: parallel
# A segment lost with its keeper and daemon (both killed -9, as a container's
# restart kills them) while a program still uses it: the next daemon makes a new
# one and holds its releases (SL_ORPHAN_HOLD_NS); the program, finding its daemon
# silent, asks the socket which segment is served, finds another, and follows it
# - told once on stderr.  No silent split: at the destination (kernel SYN stamps)
# the old program and a new one together never go past the rate, across the loss
# (docs/design.md, "Never a silent split").
. "$(dirname "$0")/lib.sh"

python3 "$HELPERS/sink.py" "$T/port" 120 &
BG_PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
PORT=$(cat "$T/port")
write_config "$T/l.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 10/s
max_wait = 1m
EOF
start_daemon "$T/l.ini"
start_syn_witness "$PORT" "$T/syns"
offer() { # SECONDS NAME: 20/s offered from one process, attached now
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 "$HELPERS/offer.py" 127.0.0.1 "$PORT" 20 "$1" \
		>"$T/$2.out" 2>"$T/$2.err" &
}
offer 12 old
old=$!
sleep 2
keeper=$(python3 -c 'import os, sys; sys.path.insert(0, os.environ["HELPERS"]); import segment
print(segment.value(segment.ask(sys.argv[1], "info")[0], "pid"))' "$SEG")
kill -9 "$DAEMON_PID" "$keeper" || fail "kill the daemon and its keeper"
t_lost=$(date +%s%N)
sleep 0.5
start_daemon "$T/l.ini"
grep -q "its keeper at $SEG died; a new segment is made, holding its releases 5 s" "$T/sluiced.log" ||
	fail "the daemon did not say it made a new segment: $(tail -3 "$T/sluiced.log")"
offer 8 new
new=$!
wait "$old" || fail "the old program failed: $(cat "$T/old.err")"
wait "$new" || fail "the new program failed: $(cat "$T/new.err")"
grep -q "^sluice: the shared queues at $SEG were made anew (their keeper was lost): following them$" "$T/old.err" ||
	fail "the old program was not told: $(cat "$T/old.err")"
sleep 0.3
witnessed "$T/syns" --interval-ms 100 --slack-ms 0.25 --at-least 60 --what "connects across the lost segment" ||
	fail "above the rate across the lost segment, or the programs stopped"
# The old program followed: the new segment counted its connects too.
"$SLUICE" stat -c "$T/l.ini" --json >"$T/s.json" || fail "stat"
python3 - "$T/syns" "$t_lost" "$(json_field "$T/s.json" api admitted)" <<'EOF' || fail "the old program did not join the new segment"
import sys
t = sorted(int(l.split()[0]) for l in open(sys.argv[1]) if l.strip())
after = [x for x in t if x > int(sys.argv[2]) + 6e9]
admitted = int(sys.argv[3])
print("after the loss: %d connects, %d of them counted by the new segment" % (len(after), admitted))
sys.exit(0 if admitted >= len(after) > 0 else 1)
EOF
echo "ok"

#!/usr/bin/env bash
# tier: serial
# sluice stat, text and JSON, from the daemon and - when it is gone - from the
# segment: queue length while callers wait, then admitted/held/refused and waits.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/s.ini" <<EOF
[slow]
match = 127.0.0.1:$PORT
rate = 2/s
[never]
match = 127.0.0.1:$PORT
rate = 1000/s
max_wait = 0
mode = observe
EOF
start_daemon "$T/s.ini"
"$SLUICE" run -c "$T/s.ini" -- python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/s" 1 10 &
client=$!
sleep 1.2
"$SLUICE" stat -c "$T/s.ini" --json >"$T/mid.json" || fail "stat --json"
queued=$(json_field "$T/mid.json" slow queued)
note "after 1.2 s: $queued waiting"
[ "$queued" -ge 4 ] && [ "$queued" -le 9 ] || fail "queued=$queued while 10 callers wait at 2/s"
"$SLUICE" stat -c "$T/s.ini" >"$T/mid.txt" || fail "stat"
grep -q "^SECTION .*QUEUED .*ADMITTED .*HELD .*REFUSED .*WAIT_P50 .*WAIT_P99 .*WAIT_MAX" "$T/mid.txt" || fail "header: $(head -3 "$T/mid.txt")"
grep -q "^slow .*leaky-bucket .*2/s" "$T/mid.txt" || fail "section row: $(cat "$T/mid.txt")"
grep -q "(observe only)" "$T/mid.txt" || fail "observe mode not shown"
wait $client || fail "client failed"

"$SLUICE" stat -c "$T/s.ini" --json >"$T/end.json"
for kv in "slow admitted 10" "slow held 9" "slow refused 0" "slow queued 0" "never admitted 10"; do
	set -- $kv
	[ "$(json_field "$T/end.json" "$1" "$2")" -eq "$3" ] || fail "$1.$2 = $(json_field "$T/end.json" "$1" "$2"), expected $3"
done
# The last caller's slot was 4.5 s after the first; waits are never shorter than that.
max=$(json_field "$T/end.json" slow wait_max_us)
[ "$max" -ge 4400000 ] || fail "wait_max $max us"
[ "$(json_field "$T/end.json" never observed)" -ge 1 ] || fail "observe counted nothing"

# Daemon gone: stat reads the segment itself.
kill "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
"$SLUICE" stat -c "$T/s.ini" >"$T/dead.txt" 2>"$T/dead.err" || fail "stat without a daemon"
grep -q "no daemon answers" "$T/dead.err" || fail "stat did not say it read the segment"
grep -q "^slow " "$T/dead.txt" || fail "stat without a daemon: $(cat "$T/dead.txt")"
"$SLUICE" stat --segment "$T/absent.segment" >/dev/null 2>"$T/none.err"
[ $? -eq 1 ] || fail "stat of a missing segment should exit 1"
grep -q "cannot read segment at $T/absent.segment: no such socket" "$T/none.err" || fail "$(cat "$T/none.err")"

#!/usr/bin/env bash
# tier: parallel
# Durable quotas (docs/shaping.md, "Quotas"): rate = 5/mo with state_dir, through a clean
# stop, a removed segment, a kill -9, a lost and a corrupt state file.  The
# destination's SYNs are the count: exactly 5 in the month however the daemon
# went down (its keeper stopped under it too), and a keyed quota (2/mo per
# address:port) keeps each key's count
# the same way.  A file that is gone or bad (a FIFO too) starts the quota used up
# (logged) until `sluice quota reset`, which gives the month afresh.
. "$(dirname "$0")/lib.sh"

start_sink() { # start_sink VAR: a TCP sink on 127.0.0.1; VAR gets its port
	start_helper "$1" "$T/port.$1" "sink $1" python3 "$HELPERS/sink.py" "$T/port.$1" 200
}
start_sink PORT
start_sink P2
start_sink P3
cat >"$T/c.ini" <<EOF
[sluice]
shm_name = $SHM_NAME
control_socket = $CTL
state_dir = $T/state

[month]
match = 127.0.0.1:$PORT
rate = 5/mo
strategy = fixed-window
max_wait = 0

[per-key]
match = 127.0.0.1:$P2, 127.0.0.1:$P3
per = address:port
rate = 2/mo
strategy = fixed-window
max_wait = 0
EOF
"$SLUICE" check -c "$T/c.ini" >"$T/check.out" || fail "sluice check refused the config: $(cat "$T/check.out")"
grep -q "# quotas (month, per-key): kept in $T/state/${SHM_NAME#/}.quota" "$T/check.out" ||
	fail "sluice check does not say which state file keeps the quotas: $(grep quotas "$T/check.out")"
start_syn_witness "$PORT" "$T/syns"

# connects PORT N: N connects through the shim, one line each: ok or refused.
connects() {
	LD_PRELOAD="$PRELOAD" SLUICE_CONFIG="$T/c.ini" SLUICE_SEGMENT="$SEG" timeout 30 python3 - "$@" <<'PY'
import socket, sys
for _ in range(int(sys.argv[2])):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()
        print("ok")
    except ConnectionRefusedError:
        print("refused")
PY
}
# expect PORT N OK WHAT: of N connects to PORT, exactly OK went.
expect() {
	local got
	got=$(connects "$1" "$2" | grep -c '^ok$')
	[ "$got" -eq "$3" ] || fail "$4: $got of $2 connects went, not $3"
}
fresh_segment() { # the daemon down: its segment removed, as a reboot would
	python3 "$HELPERS/segment.py" remove "$SEG" >/dev/null
}

start_daemon "$T/c.ini"
expect "$PORT" 3 3 "the first three of the month"
expect "$P2" 1 1 "the first key's first"
ls "$T/state/${SHM_NAME#/}.quota" >/dev/null 2>&1 || fail "no state file in state_dir"

# A clean stop saves the exact counts; the segment removed, a new daemon makes
# a new one from the file.
stop_daemon
fresh_segment
start_daemon "$T/c.ini"
grep -q "restored [0-9]* quota states from" "$T/sluiced.log" || fail "the daemon did not say it restored the quotas"
expect "$PORT" 4 2 "after a clean stop and a new segment"
expect "$P2" 2 1 "the first key after a new segment"
expect "$P3" 1 1 "the second key"
sleep 0.3
[ "$(wc -l <"$T/syns")" -eq 5 ] || fail "the destination saw $(wc -l <"$T/syns") connects in the month, not 5"

# kill -9: what was granted and not spent (a chunk: 1 of 2 here) is counted as
# spent, never handed out again - the key gets at most its one left.
{ kill -9 "$DAEMON_PID"; wait "$DAEMON_PID"; } 2>/dev/null
fresh_segment
start_daemon "$T/c.ini"
expect "$PORT" 2 0 "after kill -9 and a new segment"
got=$(connects "$P3" 3 | grep -c '^ok$')
[ "$got" -le 1 ] || fail "the second key got $got connects after kill -9, past its 2 in the month"
note "after kill -9 the second key got $got of its last 1 (a crash wastes at most a chunk)"
sleep 0.3
[ "$(wc -l <"$T/syns")" -eq 5 ] || fail "the destination saw $(wc -l <"$T/syns") connects in the month, not 5"

# A lost file: the quota starts used up, logged, until it is reset.
stop_daemon
rm -f "$T/state/${SHM_NAME#/}.quota"
fresh_segment
start_daemon "$T/c.ini"
grep -q "\[month\]: its state file is gone: used up until" "$T/sluiced.log" || fail "a lost state file was not logged"
"$SLUICE" stat -c "$T/c.ini" | grep -q "window: 5 of 5 used, 0 left" || fail "stat does not show the quota used up"
expect "$P2" 1 0 "a key of a quota whose file was lost"
"$SLUICE" quota reset -c "$T/c.ini" month >"$T/reset.out" || fail "sluice quota reset failed: $(cat "$T/reset.out")"
grep -q "^ok \[month\] reset" "$T/reset.out" || fail "quota reset said: $(cat "$T/reset.out")"
expect "$PORT" 6 5 "a month afresh after sluice quota reset"
expect "$P2" 1 0 "a key of a section not reset"

# The segment's keeper stopped while the daemon runs (as `ipcrm` once removed a
# System V segment): programs that come meanwhile wait for the shared queue and
# are refused, never count on their own; the daemon serves the same segment
# again, its count intact.
"$SLUICE" segments --remove "$SEG" >/dev/null || fail "sluice segments --remove"
expect "$PORT" 2 0 "with the segment's keeper stopped"
for _ in $(seq 50); do [ -S "$SEG" ] && break; sleep 0.1; done
[ -S "$SEG" ] || fail "the daemon did not serve the segment again"
expect "$PORT" 2 0 "with the segment served again"

# A corrupt file: refused, kept aside, and the quotas used up.
stop_daemon
printf 'garbage' | dd of="$T/state/${SHM_NAME#/}.quota" bs=1 seek=60 conv=notrunc status=none
fresh_segment
start_daemon "$T/c.ini"
grep -q "state file .* refused (its checksum does not match: corrupt): kept as .*\.bad" "$T/sluiced.log" ||
	fail "a corrupt state file was not refused in the log: $(grep -i "state file" "$T/sluiced.log")"
expect "$PORT" 2 0 "after a corrupt state file"
"$SLUICE" quota reset -c "$T/c.ini" per-key >/dev/null || fail "sluice quota reset per-key failed"
expect "$P3" 3 2 "a key after its section's reset"
"$SLUICE" quota reset -c "$T/c.ini" nosuch >"$T/reset.out" 2>&1 && fail "quota reset of no such section succeeded"
grep -q "no durable section \[nosuch\]" "$T/reset.out" || fail "quota reset of no such section said: $(cat "$T/reset.out")"

# A FIFO in the file's place: refused at once, never waited on.
stop_daemon
rm -f "$T/state/${SHM_NAME#/}.quota" && mkfifo "$T/state/${SHM_NAME#/}.quota"
fresh_segment
start_daemon "$T/c.ini"
grep -q "state file .* refused (not a regular file): kept as .*\.bad" "$T/sluiced.log" ||
	fail "a FIFO for a state file was not refused: $(grep -i "state file" "$T/sluiced.log" | tail -2)"
expect "$PORT" 2 0 "after a FIFO for a state file"
echo ok

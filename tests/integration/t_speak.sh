#!/usr/bin/env bash
# tier: parallel
# Calls that speak (docs/commands.md "When a call is held"): `sluice run` says on its own
# stderr when a call is held longer than a second and when calls are refused -
# heard from the shim in every process of the command and from the seccomp
# supervisor - never on the program's own stderr; -q and SLUICE_QUIET=1 silence
# it; joined to a running daemon it speaks too, and the command's exit status
# still comes through.
. "$(dirname "$0")/lib.sh"

SC="$BUILD_DIR/tests/static_client"
[ -x "$SC" ] || fail "$SC is missing (make test builds it)"
start_server
start_witness syn "$PORT" "$T/syn"
write_config "$T/held.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 1/2s
max_wait = 1m
EOF
write_config "$T/refuse.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF
conn='import socket, sys
for _ in range(int(sys.argv[2])):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()
    except OSError as e:
        print("refused", e.errno)'
held_re='^sluice run: held [0-9]+\.[0-9] s by \[api\], [0-9]+ queued$'

# --- held: said by sluice run, not on the program's stderr ---
"$SLUICE" run -c "$T/held.ini" -- sh -c "python3 -c '$conn' $PORT 3 2>'$T/prog.err'" 2>"$T/held.err" ||
	fail "the held run failed: $(cat "$T/held.err")"
grep -qE "$held_re" "$T/held.err" || fail "a 2 s hold was not said: $(cat "$T/held.err")"
[ "$(grep -c '^sluice run: held' "$T/held.err")" -le 2 ] || fail "said more than once per 3 s: $(cat "$T/held.err")"
grep -q sluice "$T/prog.err" && fail "the shim wrote on the program's stderr: $(cat "$T/prog.err")"
expect_spaced "$T/syn" 2000 3 "connects held and said"

# --- refused: the first said at once, the rest counted ---
"$SLUICE" run -c "$T/refuse.ini" -- python3 -c "$conn" "$PORT" 4 >"$T/refused.out" 2>"$T/refused.err"
[ "$(grep -c '^refused' "$T/refused.out")" -eq 3 ] || fail "3 refusals expected: $(cat "$T/refused.out")"
grep -qx "sluice run: refused by \[api\]: the wait would exceed max_wait" "$T/refused.err" ||
	fail "the refusal was not said: $(cat "$T/refused.err")"
grep -qx "sluice run: refused by \[api\]: the wait would exceed max_wait (2 calls)" "$T/refused.err" ||
	fail "the other refusals were not counted: $(cat "$T/refused.err")"
: >"$T/syn"

# --- -q and SLUICE_QUIET=1: nothing said ---
"$SLUICE" run -q -c "$T/refuse.ini" -- python3 -c "$conn" "$PORT" 2 >/dev/null 2>"$T/q.err"
[ -s "$T/q.err" ] && fail "-q: $(cat "$T/q.err")"
SLUICE_QUIET=1 "$SLUICE" run -c "$T/refuse.ini" -- python3 -c "$conn" "$PORT" 2 >/dev/null 2>"$T/q.err"
[ -s "$T/q.err" ] && fail "SLUICE_QUIET=1: $(cat "$T/q.err")"

# --- a static program under the supervisor ---
out=$("$SLUICE" run --seccomp -c "$T/held.ini" -- "$SC" http "$PORT" 2 1 2>"$T/static.err") ||
	fail "the static client: $out $(cat "$T/static.err")"
grep -qE "$held_re" "$T/static.err" || fail "the supervisor's hold was not said: $(cat "$T/static.err")"
: >"$T/syn"

# --- joined to the machine's daemon: said too, the exit status kept ---
start_daemon "$T/held.ini"
"$SLUICE" run -c "$T/held.ini" -- sh -c "python3 -c '$conn' $PORT 2; exit 7" 2>"$T/joined.err"
rc=$?
[ "$rc" -eq 7 ] || fail "joined: exit status $rc, the command's was 7 ($(cat "$T/joined.err"))"
grep -qE "$held_re" "$T/joined.err" || fail "joined to the daemon, the hold was not said: $(cat "$T/joined.err")"
grep -q "no daemon\|private" "$T/joined.err" && fail "it did not join the daemon: $(cat "$T/joined.err")"

# The time to the next slot, in stat, stat --json and top: the last release was
# just now, so the next is up to 2 s away.
"$SLUICE" stat -c "$T/held.ini" >"$T/stat.out" || fail "stat"
"$SLUICE" stat --json -c "$T/held.ini" >"$T/stat.json" || fail "stat --json"
"$SLUICE" top --count 1 -c "$T/held.ini" >"$T/top.out" || fail "top"
grep -qE "^  match 127\.0\.0\.1:$PORT  next slot in [0-9]+\.[0-9] ms$" "$T/stat.out" ||
	fail "stat does not show the next slot: $(cat "$T/stat.out")"
next=$(json_field "$T/stat.json" api next_slot_ms)
awk -v n="$next" 'BEGIN { exit !(n > 0 && n <= 2000) }' || fail "next_slot_ms $next, not in (0, 2000]"
awk '/NEXT_SLOT/ { for (i = 1; i <= NF; i++) if ($i == "NEXT_SLOT") c = i }
	$1 == "api" { v = $c } END { exit !(v ~ /^[0-9]+\.[0-9]ms$/) }' "$T/top.out" ||
	fail "top does not show the next slot: $(cat "$T/top.out")"
stop_daemon

# --- only the run's own user speaks through it, and only text reaches the
# terminal: the socket's name is for anyone to find ---
id nobody >/dev/null 2>&1 || fail "no user nobody"
say='import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.sendto(sys.argv[2].encode("latin-1"), "\0" + sys.argv[1])'
"$SLUICE" run -c "$T/held.ini" -- sh -c '
	python3 -c "$1" "$SLUICE_SAY" "$(printf "N own \033[31mred\033[0m")"
	runuser -u nobody -- python3 -c "$1" "$SLUICE_SAY" "R 0 5 spoofed by nobody"
	runuser -u nobody -- python3 -c "$1" "$SLUICE_SAY" "N spoofed notice by nobody"
	sleep 0.3' sh "$say" 2>"$T/spoof.err" || fail "the speaking run failed: $(cat "$T/spoof.err")"
grep -q "spoofed" "$T/spoof.err" && fail "another user's words were said: $(cat "$T/spoof.err")"
grep -q "^sluice run: own ?\[31mred?\[0m$" "$T/spoof.err" ||
	fail "the run's own notice, its escapes made '?', was not said: $(cat -v "$T/spoof.err")"
grep -q "$(printf '\033')" "$T/spoof.err" && fail "an escape sequence reached the terminal: $(cat -v "$T/spoof.err")"
echo "ok"

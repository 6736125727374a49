#!/usr/bin/env bash
# tier: check
# The daemon's log lines carry their priority where that is read (issue 51):
#   - in the foreground with stderr the journal's stream (systemd says so in
#     JOURNAL_STREAM=DEV:INODE, checked against stderr itself) every line begins
#     with "<N>", its syslog priority: <6> for what it did, <4> for a refused
#     reload - the journal files each at it (sd-daemon's convention);
#   - in the foreground otherwise, or with JOURNAL_STREAM naming another stream
#     (inherited by a child whose stderr went elsewhere), lines are plain;
#   - detached with nothing on syslog's socket, it says so on the stderr it was
#     started with and logs there (a file, a terminal), rather than losing every
#     line without a word; a pipe it lets go, saying so, so that a script reading
#     it is not left waiting.
. "$(dirname "$0")/lib.sh"

write_config "$T/good.ini" <<EOF
[a]
match = 127.0.0.1:9
rate = 1/s
EOF

# run_logged LOG [ENV...]: sluiced -f, stderr appended to LOG, then a reload it
# refuses (SIGHUP with a duplicate key), then SIGTERM.
run_logged() {
	local log=$1 pid
	shift
	cp "$T/good.ini" "$T/c.ini"
	env "$@" "$SLUICED" -f -c "$T/c.ini" 2>>"$log" &
	pid=$!
	BG_PIDS+=("$pid")
	for _ in $(seq 50); do grep -q "segment .* from $T/c.ini" "$log" && break; sleep 0.1; done
	grep -q "segment .* from $T/c.ini" "$log" || fail "sluiced did not start: $(cat "$log")"
	echo "rate = 2/s" >>"$T/c.ini"
	kill -HUP "$pid"
	for _ in $(seq 50); do grep -q "reload refused" "$log" && break; sleep 0.1; done
	kill "$pid"
	wait "$pid" 2>/dev/null
	grep -q "reload refused" "$log" || fail "no refused reload in the log: $(cat "$log")"
}

: >"$T/journal.log"
run_logged "$T/journal.log" JOURNAL_STREAM="$(stat -c '%d:%i' "$T/journal.log")"
grep -vqE '^<[3-7]>sluice(d|-keeper): ' "$T/journal.log" &&
	fail "a line without its priority on the journal's stream: $(grep -vE '^<[3-7]>' "$T/journal.log")"
grep -qE '^<6>sluiced: created segment ' "$T/journal.log" ||
	fail "starting is not logged at <6> (info): $(cat "$T/journal.log")"
grep -qE "^<4>sluiced: .*duplicate key 'rate'" "$T/journal.log" ||
	fail "the refused reload's reason is not logged at <4> (warning): $(cat "$T/journal.log")"
grep -qE '^<4>sluiced: reload refused' "$T/journal.log" ||
	fail "the refused reload is not logged at <4>: $(cat "$T/journal.log")"
grep -qE '^<6>sluiced: signal 15: stopping' "$T/journal.log" || fail "stopping is not logged at <6>"

for env in "NOT_JOURNAL=1" "JOURNAL_STREAM=1:1" "JOURNAL_STREAM=garbage"; do
	: >"$T/plain.log"
	run_logged "$T/plain.log" "$env"
	grep -q '^<' "$T/plain.log" && fail "with $env a line carries <N> where no journal reads it: $(cat "$T/plain.log")"
	grep -q '^sluiced: reload refused' "$T/plain.log" || fail "with $env the plain lines are missing: $(cat "$T/plain.log")"
done

# Detached with no syslog.  This machine may have none at /dev/log; where it has
# one, a file bound over it in a mount namespace of the daemon's own refuses.
detached() {
	if [ -S /dev/log ]; then
		: >"$T/not-a-socket"
		unshare -m sh -c 'mount --bind "$1" /dev/log && shift && exec "$@"' _ "$T/not-a-socket" "$@"
	else
		"$@"
	fi
}
cp "$T/good.ini" "$T/c.ini"
detached "$SLUICED" -c "$T/c.ini" 2>"$T/detached.log" || fail "detached sluiced did not start: $(cat "$T/detached.log")"
pid=$(pgrep -f "^$SLUICED -c $T/c.ini\$" | head -1)
[ -n "$pid" ] || fail "the detached daemon is not running: $(cat "$T/detached.log")"
BG_PIDS+=("$pid")
grep -q "no syslog at /dev/log: logging to this stderr" "$T/detached.log" ||
	fail "a detached daemon with no syslog did not say so: $(cat "$T/detached.log")"
echo "rate = 2/s" >>"$T/c.ini"
kill -HUP "$pid"
for _ in $(seq 50); do grep -q "reload refused" "$T/detached.log" && break; sleep 0.1; done
grep -q "^sluiced: reload refused" "$T/detached.log" ||
	fail "the detached daemon's later lines are lost: $(cat "$T/detached.log")"
kill "$pid"
for _ in $(seq 50); do alive "$pid" || break; sleep 0.1; done
alive "$pid" && fail "the detached daemon did not stop"

# Started from a script that reads its stderr through a pipe: the script is not
# left waiting for the pipe's end (the daemon lets it go, and says its lines are
# lost from there).
cp "$T/good.ini" "$T/c.ini"
out=$(T=$T timeout 20 bash -c "$(declare -f detached)"'; detached "$@" 2>&1' _ "$SLUICED" -c "$T/c.ini") ||
	fail "sluiced started with stderr a pipe did not return (or failed): $out"
echo "$out" | grep -q "no syslog at /dev/log: the daemon's lines are lost from here on" ||
	fail "with stderr a pipe and no syslog it did not say its lines are lost: $out"
pid=$(pgrep -f "^$SLUICED -c $T/c.ini\$" | head -1)
[ -n "$pid" ] || fail "the daemon started with stderr a pipe is not running"
BG_PIDS+=("$pid")
kill "$pid"
echo "ok"

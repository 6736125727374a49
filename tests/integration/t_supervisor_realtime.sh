#!/usr/bin/env bash
# tier: serial
# The seccomp supervisor's scheduling (docs/guarantees.md "Is it giving what I configured?",
# docs/design.md "Seccomp"): where the process may have it, the loop of
# `sluice run --seccomp`, which makes each held connect inside its release, runs
# SCHED_FIFO at priority 1, and what it starts does not inherit that
# (SCHED_RESET_ON_FORK).  It stays an ordinary thread when the process may not
# (no CAP_SYS_NICE), when RLIMIT_RTTIME is finite (SIGXCPU would kill it), and
# with SLUICE_REALTIME=0.  In every case the static program's connects reach the
# destination at the rate.  A flood of trapped calls makes the realtime loop rest
# (it may not hold a core), and the flood still completes.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root: it compares a process that may be realtime with one that may not"
SC="$BUILD_DIR/tests/static_client"
[ -x "$SC" ] || fail "$SC is missing (make test builds it)"
start_server
write_config "$T/r.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF
start_witness syn "$PORT" "$T/arrivals"

# probe NAME [WRAPPER...]: three static connects under the supervisor, then its
# policy as chrt reads it (the supervisor is the command's parent) and the
# command's own, in $T/NAME.out.
probe() {
	local name=$1
	shift
	: >"$T/arrivals"
	"$@" "$SLUICE" run --seccomp -v -c "$T/r.ini" -- bash -c \
		"$SC http $PORT 3 1 >/dev/null || exit 1; chrt -p \$PPID; chrt -p \$\$" >"$T/$name.out" 2>"$T/$name.err" ||
		{ cat "$T/$name.out" "$T/$name.err"; fail "$name: the program failed"; }
	witnessed "$T/arrivals" --interval-ms 200 --expect 3 --what "$name: connects" || fail "$name: spacing"
}
policy_of() { # FILE N: the policy chrt gave for the Nth process (1: the supervisor, 2: the command)
	grep "scheduling policy" "$1" | sed -n "${2}p" | sed 's/.*: //'
}

probe root
[ "$(policy_of "$T/root.out" 1)" = "SCHED_FIFO|SCHED_RESET_ON_FORK" ] ||
	fail "a process that may be realtime: the supervisor is $(cat "$T/root.out")"
grep "scheduling priority" "$T/root.out" | head -1 | grep -q ": 1$" || fail "the supervisor's priority: $(cat "$T/root.out")"
[ "$(policy_of "$T/root.out" 2)" = "SCHED_OTHER" ] || fail "the command inherited it: $(cat "$T/root.out")"
grep -q "the loop runs SCHED_FIFO at priority 1" "$T/root.err" || fail "not said: $(cat "$T/root.err")"

SLUICE_REALTIME=0 probe optout
[ "$(policy_of "$T/optout.out" 1)" = "SCHED_OTHER" ] || fail "SLUICE_REALTIME=0: $(cat "$T/optout.out")"
grep -q "SLUICE_REALTIME=0: the loop runs as an ordinary thread" "$T/optout.err" || fail "not said: $(cat "$T/optout.err")"

probe nocap setpriv --bounding-set -sys_nice --inh-caps -sys_nice
[ "$(policy_of "$T/nocap.out" 1)" = "SCHED_OTHER" ] || fail "without CAP_SYS_NICE: $(cat "$T/nocap.out")"

probe rttime prlimit --rttime=200000 --
[ "$(policy_of "$T/rttime.out" 1)" = "SCHED_OTHER" ] || fail "with RLIMIT_RTTIME finite: $(cat "$T/rttime.out")"

# A flood: 20,000 datagrams by sendto and sendmsg to a port nobody shapes, from
# four programs at once, each one trapped (a section meters datagrams elsewhere)
# and none held.  The realtime loop answers them back to back, the next call
# mostly waiting already; the programs must still get through them all, and -v
# must say how often the loop rested.  How often depends on the machine's timing
# (a wait in which the loop blocked, however briefly, counts as a pause: one
# program alone refilled the loop's queue slowly enough that it blocked between
# calls, and it never rested), so the count is reported, not bounded.
cp "$T/r.ini" "$T/f.ini"
cat >>"$T/f.ini" <<EOF

[elsewhere]
match = 127.0.0.2:9
meter = datagrams
rate = 5/s
EOF
UPORT=$((PORT + 1))
timeout 120 "$SLUICE" run --seccomp -v -c "$T/f.ini" -- sh -c \
	'for i in 1 2 3 4; do "$0" udp "$1" 2500 & done; wait' "$SC" "$UPORT" >"$T/flood.out" 2>"$T/flood.err" ||
	fail "the flood did not complete: $(tail -5 "$T/flood.err")"
grep -q "20000 calls trapped: 20000 went" "$T/flood.err" || fail "the flood's calls: $(tail -3 "$T/flood.err")"
rests=$(sed -n 's/.*realtime: the loop rested \([0-9]*\) times.*/\1/p' "$T/flood.err")
[ -n "$rests" ] || fail "a realtime loop that does not say how often it rested: $(tail -3 "$T/flood.err")"
echo "flood: 20000 trapped calls, the loop rested $rests times"
echo "ok"

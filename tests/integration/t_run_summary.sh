#!/usr/bin/env bash
# tier: serial
# Every hold explained (issue 51): when its command ends, `sluice run` says what
# was held, by section - calls, their waits in all, the longest - once anything
# was held at all, whatever the holds' length (a 25-request loop at 1/s took
# 25 s and printed nothing: only holds over a second were said).  Nothing when
# nothing was held; nothing with -q.  SLUICE_NOTICE sets the live notice's
# threshold (default 1 s): at 50ms each quarter-second hold is said as it comes.
# Holds before and after an exec in one process are both counted.
# Real curl processes, one connection each, through the shim.
. "$(dirname "$0")/lib.sh"

start_server
loop8() { for _ in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null "http://127.0.0.1:$PORT/" || exit 1; done; }
export -f loop8
export PORT

# 8 curls at 4/s: the first goes at once, the other seven wait about 0.25 s each.
"$SLUICE" run --match "127.0.0.1:$PORT" --rate 4/s -- bash -c loop8 2>"$T/a.err" || fail "the run failed: $(cat "$T/a.err")"
line=$(grep "^sluice run: \[cli\] held " "$T/a.err") || fail "no summary at the end: $(cat "$T/a.err")"
read -r calls all longest < <(echo "$line" | sed -E 's/.* held ([0-9]+) calls?, ([0-9.]+) s in all, the longest ([0-9.]+) s$/\1 \2 \3/')
[ -n "$longest" ] || fail "the summary is not as said: $line"
[ "$calls" -ge 3 ] && [ "$calls" -le 7 ] || fail "the summary counts $calls held calls of 8 at 4/s (3 to 7; a slow start of curl is not held): $line"
awk -v a="$all" -v c="$calls" -v l="$longest" 'BEGIN { exit !(a >= 0.05 * c && a <= 0.3 * c + 0.1 && l >= 0.05 && l <= 0.4) }' ||
	fail "the summary's waits are off (each about 0.25 s): $line"
grep -q "^sluice run: held .* by \[cli\]" "$T/a.err" && fail "a hold under a second was said live by default: $(cat "$T/a.err")"

# One process that is held, then execs another that is held: the same pid, two
# images, both counted (the second's sums start again from nothing).
"$SLUICE" run --match "127.0.0.1:$PORT" --rate 4/s -- python3 -c '
import os, socket, sys
port = int(sys.argv[1])
for _ in range(2):
    socket.create_connection(("127.0.0.1", port)).close()
os.execvp("curl", ["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%d/" % port])' "$PORT" 2>"$T/e.err" ||
	fail "the exec run failed: $(cat "$T/e.err")"
grep -q "^sluice run: \[cli\] held 2 calls, " "$T/e.err" ||
	fail "holds before and after an exec are not both counted: $(cat "$T/e.err")"

# SLUICE_NOTICE=50ms: said as they come.
SLUICE_NOTICE=50ms "$SLUICE" run --match "127.0.0.1:$PORT" --rate 4/s -- bash -c loop8 2>"$T/b.err" ||
	fail "the run with SLUICE_NOTICE failed: $(cat "$T/b.err")"
grep -q "^sluice run: held 0\.[0-9] s by \[cli\]" "$T/b.err" || fail "SLUICE_NOTICE=50ms said no hold live: $(cat "$T/b.err")"
grep -q "^sluice run: \[cli\] held " "$T/b.err" || fail "no summary with SLUICE_NOTICE: $(cat "$T/b.err")"

# -q: nothing said, at the end either.
"$SLUICE" run -q --match "127.0.0.1:$PORT" --rate 4/s -- bash -c loop8 2>"$T/c.err" || fail "the -q run failed"
[ -s "$T/c.err" ] && fail "-q said something: $(cat "$T/c.err")"

# Nothing held (two curls a second apart at 100/s): no summary.
"$SLUICE" run --match "127.0.0.1:$PORT" --rate 100/s -- bash -c \
	"curl -s -o /dev/null http://127.0.0.1:$PORT/ && sleep 1 && curl -s -o /dev/null http://127.0.0.1:$PORT/" 2>"$T/d.err" ||
	fail "the unheld run failed: $(cat "$T/d.err")"
grep -q "held" "$T/d.err" && fail "a run with nothing held said: $(cat "$T/d.err")"
echo "ok"

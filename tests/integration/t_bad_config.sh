#!/usr/bin/env bash
# tier: parallel
# (f) A bad config gets FILE:LINE errors and exit status 2 from every entry point;
# a running daemon refuses a bad reload (SIGHUP or `sluice reload`), keeps shaping
# with its old config, and takes a good one afterwards keeping the section's queue.
. "$(dirname "$0")/lib.sh"

start_server
cat >"$T/bad.ini" <<EOF
[sluice]
control_socket = $CTL
[api]
match = 127.0.0.1:$PORT
rat = 5/s
EOF
expect2() { # EXPECTED-TEXT CMD... : exit status 2 and the text on stderr
	local want=$1 rc
	shift
	"$@" >"$T/out" 2>"$T/err"
	rc=$?
	[ $rc -eq 2 ] || fail "$* exited $rc, not 2"
	grep -qF "$want" "$T/err" || fail "$* said: $(cat "$T/err"), wanted: $want"
}
hint="$T/bad.ini:5: unknown key 'rat' in [api] (did you mean 'rate'?)"
expect2 "$hint" "$SLUICE" check -c "$T/bad.ini"
expect2 "$hint" "$SLUICE" run -c "$T/bad.ini" -- true
expect2 "$hint" "$SLUICED" -n -c "$T/bad.ini"
expect2 "$hint" "$SLUICED" -f -c "$T/bad.ini"
expect2 "cannot read" "$SLUICE" check -c "$T/missing.ini"
printf '[api]\nmatch = 127.0.0.1\nconcurrency = 2\nmeter = datagrams\n' >"$T/contradiction.ini"
expect2 "concurrency is for meter = connections and requests, not datagrams" "$SLUICE" check -c "$T/contradiction.ini"
printf '[api]\nmatch = 127.0.0.1\nrate = 5K/s\n' >"$T/kilo.ini"
expect2 "K/M/G amounts are for meter = bytes only" "$SLUICE" check -c "$T/kilo.ini"
"$SLUICE" check -c "$T/bad.ini" >/dev/null 2>&1
"$SLUICE" frobnicate >/dev/null 2>&1; [ $? -eq 2 ] || fail "unknown command should exit 2"

# A good config, served by a daemon.
write_config "$T/f.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 5/s
EOF
"$SLUICE" check -c "$T/f.ini" >"$T/check.out" || fail "good config rejected"
grep -q "rate        5/s (one every 200ms)" "$T/check.out" || fail "check output: $(cat "$T/check.out")"
start_daemon "$T/f.ini"
gen=$(json_field <("$SLUICE" stat -c "$T/f.ini" --json) - generation)

# Break the file; SIGHUP and `sluice reload` are both refused.
cp "$T/f.ini" "$T/good.ini"
echo "burst = lots" >>"$T/f.ini"
kill -HUP "$DAEMON_PID"
sleep 0.5
grep -q "reload refused" "$T/sluiced.log" || fail "daemon log: $(tail -3 "$T/sluiced.log")"
grep -q "f.ini:8: burst: not a positive integer" "$T/sluiced.log" || fail "no FILE:LINE error in the log"
"$SLUICE" reload -c "$T/good.ini" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] || fail "sluice reload of a bad file exited $rc"
grep -q "f.ini:8: burst: not a positive integer" "$T/err" || fail "reload did not show the errors: $(cat "$T/err")"
kill -0 "$DAEMON_PID" || fail "daemon died on a bad reload"
gen2=$(json_field <("$SLUICE" stat -c "$T/good.ini" --json) - generation)
[ "$gen2" -eq "$gen" ] || fail "generation moved from $gen to $gen2 on a refused reload"

# Still shaping at the old 5/s (the file is bad, so attach the segment by name).
start_witness syn "$PORT" "$T/arrivals"
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log" \
	python3 "$HELPERS/fetch.py" "http://127.0.0.1:$PORT/x" 2 4 || fail "client failed"
grep -q "attached segment $SHM_NAME" "$T/shim.log" || fail "did not use the daemon's segment"
witnessed "$T/arrivals" --interval-ms 200 --expect 8 --what "connects under the old config" || fail "old config not in force"

# A good new rate is taken, and the section keeps its counters (same identity).
cp "$T/good.ini" "$T/f.ini"
sed -i 's|rate = 5/s|rate = 20/s|' "$T/f.ini"
"$SLUICE" reload -c "$T/f.ini" >"$T/out" 2>&1 || fail "good reload failed: $(cat "$T/out")"
grep -q "^ok generation" "$T/out" || fail "reload said: $(cat "$T/out")"
"$SLUICE" stat -c "$T/f.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" api rate)" = "20/s" ] || fail "rate not reloaded"
[ "$(json_field "$T/s.json" api admitted)" -eq 8 ] || fail "reload lost the section's state"

# Files that are no config are refused with a clear error, never read (a FIFO or
# /dev/zero would hang or fill the reader): sluice check and sluiced -n alike.  A
# NUL byte is an error naming its line, not a line silently cut short.
mkfifo "$T/fifo"
truncate -s 17M "$T/huge.ini"
printf '[a]\nmatch = 192.0.2.1\nra\0te = 1/s\n' >"$T/nul.ini"
for f in /dev/zero /dev/urandom "$T/fifo" "$T" "$T/huge.ini" "$T/nul.ini"; do
	for cmd in "$SLUICE check -c" "$SLUICED -n -c"; do
		timeout 10 $cmd "$f" >"$T/out" 2>&1
		rc=$?
		[ $rc -eq 2 ] || fail "$cmd $f: exit $rc, want 2: $(cat "$T/out")"
	done
done
timeout 10 "$SLUICE" check -c "$T/fifo" 2>&1 | grep -q "fifo: not a regular file" || fail "FIFO not explained"
timeout 10 "$SLUICE" check -c "$T/huge.ini" 2>&1 | grep -q "larger than 16 MiB" || fail "huge file not explained"
timeout 10 "$SLUICE" check -c "$T/nul.ini" 2>&1 | grep -q "nul.ini:3: a NUL byte in the line" || fail "NUL byte not found"

# The shipped samples are valid.
for f in "$ROOT"/conf/*.ini "$ROOT"/examples/*.ini; do
	"$SLUICE" check -c "$f" >/dev/null || fail "$f does not check"
done

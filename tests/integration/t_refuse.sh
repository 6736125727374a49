#!/usr/bin/env bash
# tier: parallel
# (c) max_wait = 0 under load: the first connection goes, the rest fail at once and
# nothing hangs.  curl connects non-blocking, so its connect is refused at once
# (curl exit 7) when the place is already taken; two connects racing for the one
# free place both proceed and the loser's first write is refused instead (exit 55,
# ECONNRESET).  refuse = ETIMEDOUT changes the error the program sees.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/c.ini" <<EOF
[strict]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
EOF

start=$(now_ms)
"$SLUICE" run -c "$T/c.ini" -- bash -c '
	# Their pids, kept as they start: `jobs -p` leaves out a job bash has already
	# reaped, and under load the one that went could finish before the last start.
	pids=()
	for i in $(seq 12); do
		curl -sS --max-time 20 -o /dev/null "http://127.0.0.1:$1/r$i" 2>>"$2/curl.err" &
		pids+=($!)
	done
	ok=0 refused=0
	for j in "${pids[@]}"; do
		wait $j; rc=$?
		case $rc in 0) ok=$((ok + 1)) ;; 7 | 55) refused=$((refused + 1)) ;; *) echo "curl exit $rc" ;; esac
	done
	echo "$ok $refused" >"$2/counts"
' _ "$PORT" "$T"
elapsed=$(($(now_ms) - start))
read -r ok refused <"$T/counts"
note "12 connections: $ok went, $refused refused, in $elapsed ms"
[ "$ok" -eq 1 ] || fail "$ok connections went, expected exactly 1"
[ "$refused" -eq 11 ] || fail "$refused refused, expected 11"
grep -q "(7) Failed to connect" "$T/curl.err" || fail "curl did not report a refused connect: $(head -2 "$T/curl.err")"
[ "$elapsed" -lt 15000 ] || fail "refusals took $elapsed ms: something waited"

# The program sees ECONNREFUSED by default, or the section's own refuse errno.
check_errno() {
	"$SLUICE" run -c "$1" -- python3 -c '
import errno, socket, sys
port = int(sys.argv[1])
socket.create_connection(("127.0.0.1", port)).close()
try:
    socket.create_connection(("127.0.0.1", port))
    print("connected")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
' "$PORT"
}
out=$(check_errno "$T/c.ini")
[ "$out" = "ECONNREFUSED" ] || fail "second connect gave '$out', expected ECONNREFUSED"

write_config "$T/c2.ini" <<EOF
[strict]
match = 127.0.0.1:$PORT
rate = 1/m
max_wait = 0
refuse = ETIMEDOUT
EOF
out=$(check_errno "$T/c2.ini")
[ "$out" = "ETIMEDOUT" ] || fail "second connect gave '$out', expected ETIMEDOUT"

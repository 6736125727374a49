#!/usr/bin/env bash
# tier: parallel
# A section's state scribbled far into the future (F5): a tat of 2^61 ns (73 years)
# once hung every client in its sleep for good (max_wait forever) or refused every
# call for good (finite max_wait), and survived a daemon restart.  Now such state is
# no schedule any admission made: the next caller resets it and goes within a window
# or two, the daemon logs the reset at its heartbeat, and stat counts it.
. "$(dirname "$0")/lib.sh"

start_server
P2=$PORT
start_server
write_config "$T/s.ini" <<EOF
[forever]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = forever

[bounded]
match = 127.0.0.1:$P2
rate = 5/s
max_wait = 3s
EOF
start_daemon "$T/s.ini"
connect() { # PORT: one connect under the shim, in at most 20 s
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 20 python3 -c '
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10).close()' "$1"
}
for sec in forever bounded; do
	addr=$PORT
	[ $sec = bounded ] && addr=$P2
	connect $addr || fail "$sec: the first connect failed"
	"$SLUICE" stat -c "$T/s.ini" --json >"$T/s.json"
	tat=$(json_field "$T/s.json" $sec tat_ns)
	# The section's tat, found by its value in the segment, set 2^61 ns ahead.
	python3 - "$SEG" "$tat" <<'EOF' || fail "$sec: could not find its tat in the segment"
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    at = f.read().find(struct.pack("<q", int(sys.argv[2])), 4096)
    assert at > 0
    f.seek(at); f.write(struct.pack("<q", 1 << 61))
EOF
	start=$(now_ms)
	connect $addr || fail "$sec: after the scribble, the connect failed (refused or hung)"
	took=$(($(now_ms) - start))
	note "$sec: a connect after tat was set 73 years ahead went in $took ms"
	[ "$took" -lt 3000 ] || fail "$sec: the scribbled tat held the connect $took ms"
done
"$SLUICE" stat -c "$T/s.ini" --json >"$T/s.json"
[ "$(json_field "$T/s.json" forever repaired)" -ge 1 ] || fail "the repair was not counted"
# The daemon finds and logs one too: scribble once more and give it a heartbeat.
"$SLUICE" stat -c "$T/s.ini" --json >"$T/s.json"
python3 - "$SEG" "$(json_field "$T/s.json" forever tat_ns)" <<'EOF'
import os, struct, sys
sys.path.insert(0, os.environ["HELPERS"]); import segment
with segment.Segment(sys.argv[1]) as f:
    at = f.read().find(struct.pack("<q", int(sys.argv[2])), 4096)
    assert at > 0
    f.seek(at); f.write(struct.pack("<q", 1 << 61))
EOF
sleep 1.5
grep -q "section \[forever\]: its state lay further ahead than any admission can put it" "$T/sluiced.log" ||
	fail "the daemon did not log the reset: $(tail -3 "$T/sluiced.log")"
echo "ok"

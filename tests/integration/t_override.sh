#!/usr/bin/env bash
# tier: parallel
# Overrides (docs/config.md, "Overrides"): a keyed section (per = address:port) at
# 5/s whose override line gives one of three destinations 20/s.  Three threads of
# python connect to the three at once; at each destination (its SYN witness) the
# two keys at the default keep 200 ms apart and the overridden one 50 ms, and it
# gets through its connects in well under the others' time - each key at its own
# rate.  sluice check shows the override as a section of its own, and stat says
# whose override it is and lists its key.
. "$(dirname "$0")/lib.sh"

for v in P1 P2 P3; do
	start_helper "$v" "$T/port.$v" "sink $v" python3 "$HELPERS/sink.py" "$T/port.$v" 120
done
write_config "$T/c.ini" <<EOF
[api]
match = 127.0.0.1:$P1, 127.0.0.1:$P2, 127.0.0.1:$P3
per = address:port
rate = 5/s
override = 127.0.0.1:$P3 20/s
EOF
"$SLUICE" check -c "$T/c.ini" >"$T/check.out" || fail "sluice check: $(cat "$T/check.out")"
grep -q "^\[api/127.0.0.1:$P3\]  (line [0-9]*: an override of \[api\]" "$T/check.out" ||
	fail "sluice check does not show the override: $(cat "$T/check.out")"
# Bad override lines are refused with their line.
write_config "$T/bad.ini" <<EOF
[plain]
match = 127.0.0.1
rate = 5/s
override = 127.0.0.1:1 20/s
[keyed]
match = 127.0.0.1
per = host
rate = 5/s
override = 127.0.0.1
EOF
"$SLUICE" check -c "$T/bad.ini" >"$T/bad.out" 2>&1 && fail "a bad override was accepted"
grep -q "override needs per = ... in \[plain\]" "$T/bad.out" || fail "an override without per: $(cat "$T/bad.out")"
grep -q "bad override '127.0.0.1'" "$T/bad.out" || fail "an override without a rate: $(cat "$T/bad.out")"

start_daemon "$T/c.ini"
for v in P1 P2 P3; do start_syn_witness "${!v}" "$T/syns.$v"; done
N=10
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$N" "$P1" "$P2" "$P3" >"$T/client.out" 2>&1 <<'PY'
import socket, sys, threading, time
n = int(sys.argv[1])
took = {}
def run(port):
    t0 = time.monotonic()
    for _ in range(n):
        socket.create_connection(("127.0.0.1", int(port)), timeout=30).close()
    took[port] = time.monotonic() - t0
threads = [threading.Thread(target=run, args=(p,)) for p in sys.argv[2:]]
for t in threads: t.start()
for t in threads: t.join()
print(" ".join("%.2f" % took[p] for p in sys.argv[2:]))
PY
note "seconds for $N connects at P1 P2 P3: $(cat "$T/client.out")"
read -r t1 t2 t3 <"$T/client.out" || fail "the client failed: $(cat "$T/client.out")"
witnessed "$T/syns.P1" --interval-ms 200 --expect "$N" --what "the first key (5/s)" || fail "the first key"
witnessed "$T/syns.P2" --interval-ms 200 --expect "$N" --what "the second key (5/s)" || fail "the second key"
witnessed "$T/syns.P3" --interval-ms 50 --expect "$N" --what "the overridden key (20/s)" || fail "the overridden key"
# The overridden key is not held to the default: it went at its own rate.
awk -v a="$t1" -v b="$t2" -v c="$t3" 'BEGIN { exit !(c < a / 2 && c < b / 2) }' ||
	fail "the overridden key was not faster than the default ones ($t3 s against $t1 and $t2 s)"
"$SLUICE" stat -c "$T/c.ini" >"$T/stat.txt"
grep -q "(override of \[api\]: its keys here run at this rate)" "$T/stat.txt" || fail "stat does not say whose override: $(cat "$T/stat.txt")"
awk -v k="127.0.0.1:$P3" '/^api\/127/ { o = 1 } o && index($0, k) { f = 1 } END { exit !f }' "$T/stat.txt" ||
	fail "stat does not list the overridden key under its override: $(cat "$T/stat.txt")"
"$SLUICE" stat -c "$T/c.ini" --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
o = [s for s in d["sections"] if s.get("override_of") == "api"]
assert len(o) == 1 and o[0]["rate"] == "20/s", o
' || fail "stat --json does not name the override"
echo ok

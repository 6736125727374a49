#!/usr/bin/env bash
# tier: check
# A reload applies every [sluice] key it can and names the ones that wait for a
# restart (issue 51; docs/config.md, "At reload"):
#   - `metrics` added at a reload is served at once, moved to another port the old
#     one closes, set to none nothing listens - where before a reload said "ok"
#     and nothing listened;
#   - a metrics address that cannot listen (another program holds it) leaves the
#     old one serving, and the reload's answer says so; the same file reloaded
#     once the address is free serves there;
#   - shm_name and state_dir changed: the answer (and the log) name them, exit 0,
#     the rest of the file applied (the section's new rate is in force).
. "$(dirname "$0")/lib.sh"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
p1=$(free_port)
p2=$(free_port)
serves() { curl -s -m 2 "http://127.0.0.1:$1/metrics" | grep -q '^sluice_build_info'; }

conf() { # METRICS_LINE RATE [EXTRA]
	write_config "$T/c.ini" <<EOF
$1
${3:-}
[a]
match = 127.0.0.1:9
rate = $2
EOF
}

conf "" 1/s
start_daemon "$T/c.ini"
serves "$p1" && fail "metrics served before any metrics key"

conf "metrics = 127.0.0.1:$p1" 1/s
"$SLUICE" reload -c "$T/c.ini" >"$T/r1" 2>&1 || fail "reload adding metrics: $(cat "$T/r1")"
grep -q "^ok generation" "$T/r1" || fail "reload did not answer ok: $(cat "$T/r1")"
grep -q "needs a restart" "$T/r1" && fail "adding metrics said a restart is needed: $(cat "$T/r1")"
serves "$p1" || fail "metrics added at a reload are not served on $p1"

conf "metrics = 127.0.0.1:$p2" 1/s
"$SLUICE" reload -c "$T/c.ini" >"$T/r2" 2>&1 || fail "reload moving metrics: $(cat "$T/r2")"
serves "$p2" || fail "metrics moved at a reload are not served on $p2"
serves "$p1" && fail "the old metrics port $p1 still serves after the move"

# Another program holds the next address: the old stays.
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(1); time.sleep(30)' "$p1" &
holder=$!
BG_PIDS+=("$holder")
for _ in $(seq 50); do python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1)' "$p1" 2>/dev/null && break; sleep 0.1; done
conf "metrics = 127.0.0.1:$p1" 1/s
"$SLUICE" reload -c "$T/c.ini" >"$T/r3" 2>&1 || fail "reload to a held metrics address: $(cat "$T/r3")"
grep -q "metrics 127.0.0.1:$p1: cannot listen" "$T/r3" || fail "a metrics address that cannot listen was not said: $(cat "$T/r3")"
serves "$p2" || fail "the old metrics address stopped serving when the new could not listen"
kill "$holder"
wait "$holder" 2>/dev/null
# The same file again, the address free now: served there (the refused address
# was not taken for the one in force).
"$SLUICE" reload -c "$T/c.ini" >"$T/r3b" 2>&1 || fail "reload to the freed metrics address: $(cat "$T/r3b")"
serves "$p1" || fail "metrics not served on $p1 once it was free: $(cat "$T/r3b")"
serves "$p2" && fail "the old metrics port $p2 still serves"

conf "metrics = none" 1/s
"$SLUICE" reload -c "$T/c.ini" >"$T/r4" 2>&1 || fail "reload with metrics = none: $(cat "$T/r4")"
serves "$p1" && fail "metrics = none at a reload: $p1 still serves"

# Keys only a restart applies: named, and the rest applied.
conf "shm_name = /sluice-other-$$" 7/s "state_dir = none"
sed -i "0,/^shm_name = .*/{/^shm_name = \/sluice-test/d}" "$T/c.ini"
"$SLUICE" reload -c "$T/c.ini" >"$T/r5" 2>&1 || fail "reload changing shm_name: $(cat "$T/r5")"
grep -q "^needs a restart: shm_name, state_dir (the rest is applied)$" "$T/r5" ||
	fail "the restart keys were not named: $(cat "$T/r5")"
grep -q "shm_name, state_dir changed: they take effect when sluiced restarts" "$T/sluiced.log" ||
	fail "the restart keys were not logged: $(tail -5 "$T/sluiced.log")"
"$SLUICE" stat -c "$T/c.ini" --json >"$T/s.json" 2>"$T/s.err" ||
	"$SLUICE" stat --segment "$T/${SHM_NAME#/}.segment" --json >"$T/s.json" || fail "stat: $(cat "$T/s.err")"
python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
a = [s for s in d["sections"] if s["name"] == "a"][0]
sys.exit(0 if "7/s" in json.dumps(a) else 1)' "$T/s.json" || fail "the new rate was not applied with the restart keys: $(cat "$T/s.json")"
stop_daemon
echo "ok"

#!/usr/bin/env bash
# tier: serial
# Keyed sections (per = ...): one rule, a queue per destination.
#  - per = host, 1,000 names (Host headers to one loopback server) at 2/s each,
#    from one node process: each name's own spacing holds at the server, and all
#    together go far faster than one key's rate (the names share no queue);
#  - meter = requests with per = host:port: two names' keep-alive requests, each
#    name spaced, the two not sharing a queue;
#  - per = address/24: 127.0.1.1 and 127.0.1.2 share a queue, 127.0.2.1 has its own;
#  - eviction: a key table of 100 records under 1,000 names in turn, while one name
#    keeps returning: idle keys are evicted, the returning (busy) one never is, and
#    its spacing holds throughout;
#  - a table full of busy keys: new keys are refused with the section's errno,
#    counted in stat and said in the debug log; stat --top and --json show keys;
#  - the key table's size: a reload asking for more is refused, saying why; a
#    restart with no program attached makes it anew with the keys carried over;
#  - concurrency per key: each host its own places, all given back after kill -9.
# Spacing is checked where the requests arrive (kernel times of each connection's
# first segment, with its Host header or destination address).
. "$(dirname "$0")/lib.sh"

start_server --also 127.0.1.1 --also 127.0.1.2 --also 127.0.2.1
JS="$HELPERS/keyed_requests.js"

# --- per = host: 1,000 names at 2/s each ---
write_config "$T/host.ini" <<EOF
[per-host]
match = *.keyed.test
per = host
rate = 2/s
max_wait = 1m
EOF
WITNESS_KEY=host start_witness first "$PORT" "$T/first"
out=$("$SLUICE" run -c "$T/host.ini" -- node "$JS" "$PORT" 1000 2 1000) || fail "node, per = host: $out"
[ "${out% *}" = "done 2000 0" ] || fail "per = host: not every request completed: $out"
# One key's rate would take 1,000 s for these; sharing any queue, far longer than 20/s.
# (1,000 node connections at once on two cores: each first write, which names its
# connection, is made inside its release, so a worker taken off its core there
# holds the next release up with it)
witnessed "$T/first" --interval-ms 500 --group-field 4 --groups 1000 --expect 2000 --min-rate 20 \
	--what "requests (per = host)" || fail "per = host: spacing or throughput"
kill "$WITNESS_PID"

# --- meter = requests, per = host:port: keep-alive requests of two names ---
write_config "$T/req.ini" <<EOF
[per-name-requests]
match = *.keyed.test
meter = requests
per = host:port
rate = 5/s
max_wait = 1m
EOF
WITNESS_KEY=host start_witness request "$PORT" "$T/req"
"$SLUICE" run -c "$T/req.ini" -- python3 -c '
import http.client, sys, threading
def client(name):
    c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=20)
    for i in range(4):
        c.request("GET", "/%s%d" % (name, i), headers={"Host": name + ".keyed.test"})
        assert c.getresponse().read() == b"hello /%s%d\n" % (name.encode(), i)
ts = [threading.Thread(target=client, args=(n,)) for n in ("a", "b")]
[t.start() for t in ts]
[t.join() for t in ts]
' "$PORT" || fail "python3, requests per host:port"
witnessed "$T/req" --interval-ms 200 --group-field 4 --groups 2 --expect 8 \
	--what "requests (per = host:port)" || fail "requests per host:port: spacing"
python3 -c '
import sys
rows = [l.split() for l in open(sys.argv[1])]
a = [int(r[0]) for r in rows if r[3] == "a.keyed.test"]
b = [int(r[0]) for r in rows if r[3] == "b.keyed.test"]
sys.exit(0 if min(abs(x - y) for x in a for y in b) < 150e6 else 1)' "$T/req" ||
	fail "requests per host:port: the two names shared a queue"
kill "$WITNESS_PID"

# --- per = address/24 ---
write_config "$T/net.ini" <<EOF
[per-net]
match = 127.0.1.0/24:$PORT, 127.0.2.0/24:$PORT
per = address/24
rate = 5/s
max_wait = 1m
EOF
WITNESS_KEY=dst start_witness syn "$PORT" "$T/syn"
"$SLUICE" run -c "$T/net.ini" -- sh -c '
	for i in 1 2 3; do for a in 127.0.1.1 127.0.1.2; do
		curl -sS "http://$a:$1/a$i-$a" >/dev/null || exit 1
	done; done &
	for i in 1 2 3; do curl -sS "http://127.0.2.1:$1/b$i" >/dev/null || exit 1; done
	wait $! || exit 1' _ "$PORT" || fail "curl, per = address/24"
witnessed "$T/syn" --interval-ms 200 --group-field 4 --group-prefix 24 --groups 2 --expect 9 \
	--what "connects (per = address/24)" || fail "per = address/24: spacing or grouping"
# The two /24s do not share a queue: some connects of one come closer to the
# other's than one interval (one queue would keep all nine 200 ms apart).
python3 -c '
import sys
rows = [l.split() for l in open(sys.argv[1])]
a = [int(r[0]) for r in rows if r[3].startswith("127.0.1.")]
b = [int(r[0]) for r in rows if r[3] == "127.0.2.1"]
closest = min(abs(x - y) for x in a for y in b) / 1e6
print("closest connects of the two /24s: %.1f ms" % closest)
sys.exit(0 if closest < 150 else 1)' "$T/syn" || fail "per = address/24: the two networks shared a queue"
kill "$WITNESS_PID"

# --- eviction: 100 records, 1,000 names in turn, one name returning ---
write_config "$T/evict.ini" <<EOF
keys = 100

[evicting]
match = *.keyed.test
per = host
rate = 1000/s
max_wait = 1m

[returning]
match = *.back.test
per = host
rate = 5/s
max_wait = 1m
EOF
start_daemon "$T/evict.ini"
WITNESS_KEY=host start_witness first "$PORT" "$T/evict"
# The two sections share the table.  A fresh name's key is busy for 1 ms after
# its request: even with node's 16 workers going at 5,000 requests a second, a
# handful are busy at once, so every name finds a record (at 50/s a key was busy
# for 20 ms, and at that pace the whole table was: its 32 records a new key may
# use were all busy, and it was refused).
# The names go by three times over: each comes back after its key was evicted.
# The returning name asks 5 at once every 900 ms at 5/s: its key always has a
# queue and is used only once every 200 ms, while many keys a second come and go
# - the least recently used record often enough, but busy.  Evicted then, its
# next request would go at once, on the heels of its last.
out=$("$SLUICE" run -c "$T/evict.ini" -- node "$JS" "$PORT" 1000 1 16 r.back.test 900 8 5 3 2>"$T/evict.err") ||
	fail "node, eviction: $out $(cat "$T/evict.err")"
"$SLUICE" stat -c "$T/evict.ini" --json >"$T/evict.json" || fail "stat --json"
# A failed request says which and why (node's error code), and the table's
# refusals for want of room are counted: both go in the message.
[ "${out% *}" = "done 3040 0" ] || fail "eviction: not every request completed: $out $(cat "$T/evict.err");" \
	"key_full: $(json_field "$T/evict.json" evicting key_full) $(json_field "$T/evict.json" returning key_full);" \
	"the server: $(cat "$SERVER_LOG.errors" 2>/dev/null)"
evictions=$(json_field "$T/evict.json" evicting key_evictions)
keys=$(($(json_field "$T/evict.json" evicting keys) + $(json_field "$T/evict.json" returning keys)))
[ "$(json_field "$T/evict.json" returning key_evictions)" -eq 0 ] ||
	fail "eviction: the returning key was evicted"
note "1,001 names, three times over, through 100 records: $evictions evictions, $keys keys held at the end"
[ "$evictions" -ge 2900 ] || fail "eviction: only $evictions idle keys evicted"
[ "$keys" -le 100 ] || fail "eviction: $keys keys in a table of 100"
# Each of the returning name's 40 waited its turn, 200 ms after the one before;
# each name's three came at least 20 ms apart.
witnessed "$T/evict" --interval-ms 20 --group-field 4 --expect 3040 --groups 1001 \
	--what "requests (eviction)" || fail "eviction: a key's spacing broke"
grep ' r\.back\.test$' "$T/evict" >"$T/evict-r"
witnessed "$T/evict-r" --interval-ms 200 --expect 40 \
	--what "requests (eviction)" || fail "eviction: a key's spacing broke"
stop_daemon
kill "$WITNESS_PID"

# --- a full table of busy keys: refused, counted, said ---
write_config "$T/full.ini" <<EOF
keys = 40

[full]
match = *.keyed.test
per = host
rate = 1/m
max_wait = 0
refuse = ECONNRESET
EOF
start_daemon "$T/full.ini"
out=$(SLUICE_DEBUG=1 SLUICE_LOG="$T/full.log" "$SLUICE" run -c "$T/full.ini" -- \
	node "$JS" "$PORT" 100 1 1 2>"$T/full.err") || fail "node, full table: $out $(cat "$T/full.err")"
ok=$(echo "$out" | cut -d' ' -f2)
refused=$(echo "$out" | cut -d' ' -f3)
"$SLUICE" stat -c "$T/full.ini" --json >"$T/full.json" || fail "stat --json"
full=$(json_field "$T/full.json" full key_full)
note "100 names, a minute each, 40 records: $ok went, $refused refused, key_full $full"
[ "$ok" -le 40 ] && [ "$ok" -ge 1 ] || fail "full table: $ok of 100 went with 40 records"
[ "$refused" -eq $((100 - ok)) ] && [ "$full" -eq "$refused" ] ||
	fail "full table: $refused refused, key_full $full"
[ "$(grep -c 'no room in the key table' "$T/full.log")" -eq "$refused" ] ||
	fail "full table: refusals not in the debug log: $(grep -m3 refused "$T/full.log")"
# stat --top: the busiest keys, with their counts.
"$SLUICE" stat -c "$T/full.ini" --top 3 >"$T/full.stat" || fail "stat --top"
grep -q "per host: $ok keys, 0 evicted idle, $refused refused (key table full)" "$T/full.stat" ||
	fail "stat: no key summary: $(cat "$T/full.stat")"
[ "$(grep -c '^    n[0-9]*\.keyed\.test  *admitted 1, queued 0, open 0' "$T/full.stat")" -eq 3 ] ||
	fail "stat --top 3: $(cat "$T/full.stat")"
python3 -c '
import json, sys
s = [s for s in json.load(open(sys.argv[1]))["sections"] if s["name"] == "full"][0]
assert s["per"] == "host" and len(s["top"]) == 5 and all(t["admitted"] == 1 for t in s["top"]), s
' "$T/full.json" || fail "stat --json: no top keys"
# sluice acquire: a keyed section by name is no queue; by destination, that key's.
"$SLUICE" acquire -c "$T/full.ini" full 2>"$T/acq.err" && fail "acquire of a keyed section by name went"
grep -q "keeps a queue per destination" "$T/acq.err" || fail "acquire by name: $(cat "$T/acq.err")"
first=$(grep -o '^    n[0-9]*\.keyed\.test' "$T/full.stat" | head -1 | tr -d ' ')
"$SLUICE" acquire -c "$T/full.ini" "$first:$PORT" 2>/dev/null &&
	fail "acquire for $first went though its key had its one a minute"
stop_daemon

# --- the key table's size: fixed per segment; a restart with nobody attached
# makes it anew, keys and queues carried over ---
write_config "$T/size.ini" <<EOF
keys = 64

[sized]
match = *.keyed.test
per = host
rate = 1/m
max_wait = 0
EOF
start_daemon "$T/size.ini"
out=$("$SLUICE" run -c "$T/size.ini" -- node "$JS" "$PORT" 3 1 1) || fail "node, sized: $out"
[ "${out% *}" = "done 3 0" ] || fail "sized: $out"
# More keys than the segment has: the reload makes a larger one, the keys (and
# their queues) carried over, without a restart (docs/guarantees.md "Crash safety").
sed -i 's/^keys = 64$/keys = 128/' "$T/size.ini"
"$SLUICE" reload -c "$T/size.ini" >"$T/reload.out" 2>&1 || fail "a reload to more keys: $(cat "$T/reload.out")"
grep -q "made anew for the larger config" "$T/sluiced.log" || fail "the reload did not say it made the segment anew"
"$SLUICE" stat -c "$T/size.ini" --json >"$T/size.json"
[ "$(json_field "$T/size.json" - max_keys)" -eq 128 ] || fail "reloaded with keys = 128: $(cat "$T/size.json")"
[ "$(json_field "$T/size.json" sized keys)" -eq 3 ] || fail "the keys were not carried into the new segment"
# Carried with their queues: each of the three names has had its one a minute.
out=$("$SLUICE" run -c "$T/size.ini" -- node "$JS" "$PORT" 4 1 1) || fail "node, resized: $out"
[ "${out% *}" = "done 1 3" ] || fail "after the resize, the carried keys let more through: $out"
stop_daemon

# --- concurrency per key, given back after kill -9 ---
write_config "$T/conc.ini" <<EOF
[places]
match = 127.0.1.0/24:$PORT, 127.0.2.0/24:$PORT
per = address
concurrency = 2
max_wait = 0
EOF
start_daemon "$T/conc.ini"
# Two holders per address take all of that address's places (blocking connects
# kept open); a third to each address is refused, one to another address is not.
for a in 127.0.1.1 127.0.1.2; do
	for _ in 1 2; do
		"$SLUICE" run -c "$T/conc.ini" -- python3 -c '
import socket, sys, time
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
open(sys.argv[3], "a").write("up\n")
time.sleep(60)' "$a" "$PORT" "$T/up" &
		BG_PIDS+=($!)
		disown $! # killed below on purpose: no job notice
	done
done
for _ in $(seq 100); do
	[ -f "$T/up" ] && [ "$(wc -l <"$T/up")" -ge 4 ] && break
	sleep 0.1
done
[ "$(wc -l <"$T/up")" -eq 4 ] || fail "concurrency per key: the holders did not connect"
try() {
	"$SLUICE" run -c "$T/conc.ini" -- python3 -c '
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2]))).close()
    print("connected")
except OSError as e:
    print("refused" if e.errno in (111, 104) else "error %s" % e)' "$1" "$PORT"
}
[ "$(try 127.0.1.1)" = refused ] || fail "concurrency per key: a third place at 127.0.1.1"
[ "$(try 127.0.2.1)" = connected ] || fail "concurrency per key: 127.0.2.1 shared another key's places"
"$SLUICE" stat -c "$T/conc.ini" --json >"$T/conc.json"
[ "$(json_field "$T/conc.json" places open)" -eq 4 ] || fail "concurrency per key: open count"
pkill -9 -f "time.sleep\(60\)" || fail "no holder to kill"
for _ in $(seq 50); do
	"$SLUICE" stat -c "$T/conc.ini" --json >"$T/conc.json"
	[ "$(json_field "$T/conc.json" places open)" -eq 0 ] && break
	sleep 0.1
done
[ "$(json_field "$T/conc.json" places open)" -eq 0 ] || fail "places of killed holders not given back"
[ "$(try 127.0.1.1)" = connected ] || fail "concurrency per key: place not reusable after kill -9"
echo "ok"

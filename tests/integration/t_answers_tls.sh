#!/usr/bin/env bash
# tier: parallel
# Signals from the destination over HTTPS (docs/shaping.md "Signals from the destination"):
# the shim reads the plaintext through libssl's SSL_read/SSL_write - python3, which
# loads libssl RTLD_LOCAL through its _ssl module, and curl, whose own BIO hides
# the socket from SSL_get_fd - against a local TLS server that answers one request
# 429 with Retry-After: 2.  A new connection per request (meter = connections): the
# kernel's SYN record must show nothing for 2 s after the answer (but what was let
# go before the client read it); and meter = requests over HTTPS keep-alive counts
# real requests, found in the plaintext.
. "$(dirname "$0")/lib.sh"

openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1" -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"
pf="$T/port.answers"
start_helper PORT "$pf" "answers server" python3 "$HELPERS/answers_server.py" --port-file "$pf" \
	--log "$T/server.log" --lifetime 120 --tls "$T/cert.pem" "$T/key.pem"
write_config "$T/tls.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
rate = 50/s
max_wait = 1m
EOF
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"
start_syn_witness "$PORT" "$T/syns"
answers_seen() { sleep 0.3; python3 "$HELPERS/answers_check.py" "$T/syns" "$T/server.log" "$@"; }

# --- python3: libssl loaded RTLD_LOCAL ---
"$SLUICE" run -c "$T/tls.ini" -- python3 "$HELPERS/answers_client.py" "https://127.0.0.1:$PORT" 5 --procs 3 \
	--cafile "$T/cert.pem" --cue "1:/say/429?Retry-After=2&who=python" >"$T/client.out" 2>&1 ||
	{ cat "$T/client.out"; fail "python3 over HTTPS failed"; }
grep -q "libssl loaded locally" "$T/shim.log" || fail "python3's libssl was not found"
# python3 decrypts and parses its answer in the test's other lane at nice 5: a
# clean clone's run saw a connect let go in another of its processes arrive
# 11 ms after the server began the answer, before python had read it.  One
# release at 50/s (20 ms) plus that read may be on its way.
answers_seen --pause "/say/429=2" --spread 4 --inflight-ms 30 || fail "python3 over HTTPS: the 429 did not pause the queue"

# --- curl: its own BIO; a loop of curls in three processes, one sends the cue ---
"$SLUICE" run -c "$T/tls.ini" -- bash -c '
	end=$((SECONDS + 5))
	for loop in 1 2 3; do
		( while [ $SECONDS -lt $end ]; do
			curl -sS --cacert "$1" -o /dev/null "https://127.0.0.1:$2/n" || exit 1
		done ) &
	done
	sleep 1
	curl -sS --cacert "$1" -o /dev/null "https://127.0.0.1:$2/say/429?Retry-After=2&who=curl" || exit 1
	wait' _ "$T/cert.pem" "$PORT" >"$T/curl.out" 2>&1 || { cat "$T/curl.out"; fail "curl over HTTPS failed"; }
grep -q "libssl in the global scope" "$T/shim.log" || fail "curl's libssl was not found"
# curl reads its answer tens of milliseconds after the server wrote it (one run
# here: 40 ms): what it let go meanwhile is on its way.
answers_seen --pause "/say/429=2" --spread 4 --inflight-ms 60 || fail "curl over HTTPS: the 429 did not pause the queue"
[ "$(grep -c "answer on fd .*429 (retry-after): pause 2000ms" "$T/shim.log")" -ge 2 ] ||
	fail "the two 429s were not both read"

# --- meter = requests over HTTPS keep-alive: real requests, found in the
# plaintext, not turns.  python3 (6 on one connection) and curl (4 URLs on one
# connection; it offers h2, the server chooses HTTP/1.1).  Judged on kernel
# times: TLS hides the requests from the witness, but each is the first segment
# of its turn (after the server's last answer: the witness's `request` mode),
# and the one the server read a request from is the last such segment at or
# before its stamp.  The server's own stamps came up to 37 ms late on a loaded
# machine (gaps 101, 136, 81 ms for four requests spaced 100 ms by the shim).
# Requests must be 100 ms apart, less 10 ms of the kernel's and witness's
# noise, and exactly one place taken per request. ---
write_config "$T/req.ini" <<EOF
[api]
match = 127.0.0.1:$PORT
meter = requests
rate = 10/s
max_wait = 1m
EOF
start_witness request "$PORT" "$T/turns"
spacing() { # PREFIX COUNT: the kernel times of the requests to paths starting with PREFIX
	sleep 0.3 # the witness's last lines
	python3 - "$T/server.log" "$T/turns" "$1" "$2" <<'PY'
import bisect, sys
served = sorted(int(l.split()[0]) for l in open(sys.argv[1]) if l.split()[1].startswith(sys.argv[3]))
turns = sorted(int(l.split()[0]) for l in open(sys.argv[2]) if l.strip())
t = []
for s in served:
    i = bisect.bisect_right(turns, s)
    if i == 0:
        sys.exit("%s: no segment of the witness before the server read it" % sys.argv[3])
    t.append(turns[i - 1])
gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:])]
print("%s: %d requests, gaps %s ms (kernel; the server's stamps %s ms later)" % (
    sys.argv[3], len(t), " ".join("%.1f" % g for g in gaps), " ".join("%.1f" % ((s - k) / 1e6) for s, k in zip(served, t))))
sys.exit(0 if len(t) == int(sys.argv[4]) and len(set(t)) == len(t) and min(gaps) >= 90 else 1)
PY
}
: >"$T/shim.log"
"$SLUICE" run -c "$T/req.ini" -- python3 - "$PORT" "$T/cert.pem" <<'PY' || fail "python3 keep-alive over HTTPS failed"
import http.client, ssl, sys
c = http.client.HTTPSConnection("127.0.0.1", int(sys.argv[1]), context=ssl.create_default_context(cafile=sys.argv[2]))
for i in range(6):
    c.request("GET", "/keep-py/%d" % i)
    r = c.getresponse()
    assert r.status == 200 and r.read() == b"200 /keep-py/%d\n" % i
PY
spacing /keep-py 6 || fail "python3: requests over HTTPS not spaced as requests"
grep -q "TLS through libssl: HTTP/1 requests found" "$T/shim.log" || fail "python3: not counted from the plaintext"
[ "$(grep -c ' request .* go ' "$T/shim.log")" -eq 5 ] || fail "python3: not one place per request"
: >"$T/shim.log"
"$SLUICE" run -c "$T/req.ini" -- curl -sS --cacert "$T/cert.pem" -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
	"https://127.0.0.1:$PORT/keep-curl/a" "https://127.0.0.1:$PORT/keep-curl/b" \
	"https://127.0.0.1:$PORT/keep-curl/c" "https://127.0.0.1:$PORT/keep-curl/d" || fail "curl keep-alive over HTTPS failed"
spacing /keep-curl 4 || fail "curl: requests over HTTPS not spaced as requests"
grep -q "the server chose HTTP/1 over TLS" "$T/shim.log" || fail "curl: not counted from the plaintext"
[ "$(grep -c ' request .* go ' "$T/shim.log")" -eq 3 ] || fail "curl: not one place per request"
[ "$(grep -c ' connect .* go ' "$T/shim.log")" -eq 1 ] || fail "curl: not one connection"

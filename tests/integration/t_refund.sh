#!/usr/bin/env bash
# tier: parallel
# Refunds (docs/config.md, "Refunds"): answers the destination does not count are
# given back.  A quota of 3 requests an hour with refund = 304: python requests on
# one keep-alive session sends five revalidations answered 304 and then five GETs -
# all five 304s go, and exactly 3 GETs (the destination counts 3); the same over
# HTTPS with curl (libssl); a 200 is never given back.  meter = connections:
# connections whose first answer is a 304 are given back; with refund = failed, connects refused by the kernel (nothing listens) give their
# place back, blocking (python) and non-blocking (curl: SO_ERROR) - five SYNs
# reach a port whose quota is 2, and the quota is still whole after.
. "$(dirname "$0")/lib.sh"

openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost -addext "subjectAltName=IP:127.0.0.1" -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" >/dev/null 2>&1 || fail "cannot make a certificate"
start_server
HPORT=$PORT
start_helper CPORT "$T/port.conn" "second server" python3 "$HELPERS/server.py" --port-file "$T/port.conn" \
	--log "$T/conn.log" --lifetime 200
start_helper TPORT "$T/port.tls" "TLS server" python3 "$HELPERS/server.py" --port-file "$T/port.tls" \
	--log "$T/tls.log" --lifetime 200 --tls "$T/cert.pem" "$T/key.pem"
# A port nothing listens on: the kernel refuses each connect (RST).
CLOSED=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
write_config "$T/c.ini" <<EOF
[api]
match = 127.0.0.1:$HPORT
meter = requests
rate = 3/h
strategy = fixed-window
refund = 304
max_wait = 0

[api-tls]
match = 127.0.0.1:$TPORT
meter = requests
rate = 3/h
strategy = fixed-window
refund = 304, 5xx
max_wait = 0

[per-connection]
match = 127.0.0.1:$CPORT
rate = 2/h
strategy = fixed-window
refund = 304
max_wait = 0

[refused]
match = 127.0.0.1:$CLOSED
rate = 2/h
strategy = fixed-window
refund = failed
max_wait = 0
EOF
"$SLUICE" check -c "$T/c.ini" >"$T/check.out" || fail "sluice check: $(cat "$T/check.out")"
grep -q "^  refund *304, 5xx$" "$T/check.out" || fail "sluice check does not write the refund list back"
start_daemon "$T/c.ini"
export SLUICE_DEBUG=1 SLUICE_LOG="$T/shim.log"

# --- python requests, one keep-alive session: 5 answered 304, then 5 GETs ---
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 python3 - "$HPORT" >"$T/py.out" 2>&1 <<'PY'
import requests, sys
s = requests.Session()
base = "http://127.0.0.1:%s" % sys.argv[1]
for i in range(5):
    print(s.get(base + "/status/304").status_code)
for i in range(5):
    try:
        print(s.get(base + "/ok").status_code)
    except requests.exceptions.ConnectionError:
        print("refused")
        s = requests.Session()
PY
note "python: $(tr '\n' ' ' <"$T/py.out")"
[ "$(grep -c '^304$' "$T/py.out")" -eq 5 ] || fail "the five 304s did not all go: $(cat "$T/py.out")"
[ "$(grep -c '^200$' "$T/py.out")" -eq 3 ] || fail "not exactly 3 GETs answered 200: $(cat "$T/py.out")"
[ "$(grep -c '^refused$' "$T/py.out")" -eq 2 ] || fail "the GETs past the quota were not refused: $(cat "$T/py.out")"
sleep 0.2
[ "$(grep -c ' /ok$' "$SERVER_LOG")" -eq 3 ] || fail "the destination counted $(grep -c ' /ok$' "$SERVER_LOG") GETs, not 3"
[ "$(grep -c ' /status/304$' "$SERVER_LOG")" -eq 5 ] || fail "the destination did not see the five revalidations"
grep -q "given back in 1 section (refund)" "$T/shim.log" || fail "the shim did not say it gave a request back"

# --- curl over HTTPS, one connection: 304, 503, 304, 200 x4 ---
urls=()
for p in status/304 status/503 status/304 ok ok ok ok; do urls+=(-o /dev/null "https://127.0.0.1:$TPORT/$p"); done
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 60 curl -s --cacert "$T/cert.pem" \
	-w '%{http_code}\n' "${urls[@]}" >"$T/curl.out" 2>&1
note "curl: $(tr '\n' ' ' <"$T/curl.out")"
sleep 0.2
[ "$(grep -c ' /ok$' "$T/tls.log")" -eq 3 ] || fail "over HTTPS the destination counted $(grep -c ' /ok$' "$T/tls.log") GETs, not 3"
[ "$(grep -c ' /status/' "$T/tls.log")" -eq 3 ] || fail "over HTTPS the 304s and the 503 did not all go"

# --- meter = connections: a connection whose first answer is a 304 ---
for p in status/304 status/304 status/304 status/304 ok ok ok; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 curl -s -o /dev/null -w '%{http_code}\n' \
		"http://127.0.0.1:$CPORT/$p" >>"$T/conn.out" 2>&1
done
note "curl, a connection each: $(tr '\n' ' ' <"$T/conn.out")"
sleep 0.2
[ "$(grep -c ' /status/304$' "$T/conn.log")" -eq 4 ] || fail "the connections answered 304 were not all given back"
[ "$(grep -c ' /ok$' "$T/conn.log")" -eq 2 ] || fail "the destination saw $(grep -c ' /ok$' "$T/conn.log") connections counted, not 2"

# --- refund = failed: connects the kernel refuses ---
start_syn_witness "$CLOSED" "$T/syns"
LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 python3 - "$CLOSED" >"$T/refused.out" 2>&1 <<'PY'
import socket, sys
for i in range(3):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
        print("connected")
    except ConnectionRefusedError:
        print("refused")
PY
for _ in 1 2; do
	LD_PRELOAD="$PRELOAD" SLUICE_SEGMENT="$SEG" timeout 30 curl -s -o /dev/null "http://127.0.0.1:$CLOSED/" && fail "curl reached a closed port"
done
sleep 0.3
[ "$(wc -l <"$T/syns")" -eq 5 ] || fail "$(wc -l <"$T/syns") SYNs reached the closed port, not 5 (refused connects were not given back)"
"$SLUICE" stat -c "$T/c.ini" >"$T/stat.txt"
grep -A3 "^refused\|\[refused\]\|refused " "$T/stat.txt" | grep -q "window: 0 of 2 used, 2 left" ||
	fail "the quota of the refused connects is not whole: $(grep -A4 refused "$T/stat.txt")"
grep -q "5 refunded" "$T/stat.txt" || fail "stat does not count the refunds: $(cat "$T/stat.txt")"
echo ok

#!/usr/bin/env bash
# Signals from the destination over HTTPS (README "Signals from the destination"):
# the shim reads the plaintext through libssl's SSL_read/SSL_write - python3, which
# loads libssl RTLD_LOCAL through its _ssl module, and curl, whose own BIO hides
# the socket from SSL_get_fd - against a local TLS server that answers one request
# 429 with Retry-After: 2.  A new connection per request (meter = connections): the
# kernel's SYN record must show nothing for 2 s after the answer (but what was let
# go before the client read it).
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
check() { sleep 0.3; python3 "$HELPERS/answers_check.py" "$T/syns" "$T/server.log" "$@"; }

# --- python3: libssl loaded RTLD_LOCAL ---
"$SLUICE" run -c "$T/tls.ini" -- python3 "$HELPERS/answers_client.py" "https://127.0.0.1:$PORT" 5 --procs 3 \
	--cafile "$T/cert.pem" --cue "1:/say/429?Retry-After=2&who=python" >"$T/client.out" 2>&1 ||
	{ cat "$T/client.out"; fail "python3 over HTTPS failed"; }
grep -q "libssl loaded locally" "$T/shim.log" || fail "python3's libssl was not found"
check --pause "/say/429=2" --spread 7 || fail "python3 over HTTPS: the 429 did not pause the queue"

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
check --pause "/say/429=2" --spread 7 --inflight-ms 60 || fail "curl over HTTPS: the 429 did not pause the queue"
[ "$(grep -c "answer on fd .*429 (retry-after): pause 2000ms" "$T/shim.log")" -ge 2 ] ||
	fail "the two 429s were not both read"

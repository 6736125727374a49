#!/usr/bin/env bash
# tier: parallel
# The README's `$` commands, run as written (helpers/readme_commands.py), in
# namespaces of the test's own: a network namespace where hooks.example.com and
# api.example.com are this loopback (an /etc/hosts bound over the machine's in a
# mount namespace), an HTTPS server on 443 with a certificate curl is told to
# trust, an IPC namespace for the segments, a /run of its own for the control
# sockets, and a PID namespace: the daemon a README command starts (it detaches)
# ends with the test.  Nothing leaves the namespaces.
if [ -z "${SL_README_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (namespaces)"; exit 1; }
	exec env SL_README_NS=1 unshare --mount --net --ipc --pid --fork --mount-proc bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

ip link set lo up || fail "no loopback in the namespace"
mount --make-rprivate / || fail "mount --make-rprivate"
mount -t tmpfs tmpfs /run || fail "no /run of its own"
printf '127.0.0.1 localhost\n127.0.0.1 hooks.example.com api.example.com\n' >"$T/hosts"
mount --bind "$T/hosts" /etc/hosts || fail "cannot bind a hosts file"
openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=hooks.example.com \
	-addext "subjectAltName=DNS:hooks.example.com" -days 1 \
	-keyout "$T/key.pem" -out "$T/cert.pem" 2>/dev/null || fail "openssl req"
start_helper PORT "$T/https.port" "HTTPS server on 443" \
	python3 "$HELPERS/server.py" --port 443 --port-file "$T/https.port" --tls "$T/cert.pem" "$T/key.pem" \
	--lifetime 240
[ "$PORT" = 443 ] || fail "the server is on $PORT, not 443"
start_witness syn 443 "$T/arrivals"

mkdir "$T/work"
cp "$ROOT/examples/send-webhooks" "$T/work/"
# The commands as a user runs them: sluice on the PATH, curl trusting the server.
PATH="$BUILD_DIR:$PATH" SLUICE_LIB="$PRELOAD" CURL_CA_BUNDLE="$T/cert.pem" \
	python3 "$HELPERS/readme_commands.py" "$ROOT/README.md" "$T/work" "$T/arrivals" >"$T/out" 2>&1 ||
	fail "$(cat "$T/out")"
note "$(cat "$T/out")"
[ "$(grep -c '^ran `sluice run' "$T/out")" -ge 2 ] || fail "fewer sluice runs than the README has: $(cat "$T/out")"
grep -q '^ran `for .*sluice acquire.*at the server=3 ' "$T/out" || fail "the acquire loop was not held to its rate: $(cat "$T/out")"
echo "ok"

#!/usr/bin/env bash
# tier: parallel
# The `$` commands of the README and docs/*.md, run as written in that order
# (helpers/readme_commands.py), in namespaces of the test's own: a network
# namespace where hooks.example.com and api.example.com are this loopback (an
# /etc/hosts bound over the machine's in a mount namespace), an HTTPS server on 443 with a certificate curl is told to
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
# As on a machine with nothing installed: no config at /etc/sluice.
if [ -d /etc/sluice ]; then mount -t tmpfs tmpfs /etc/sluice || fail "cannot hide /etc/sluice"; fi
unset SLUICE_CONFIG
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

# The local server the README's first examples start themselves, on 8000.
start_witness syn 8000 "$T/arrivals.8000"

mkdir -p "$T/work/examples" "$T/xdg"
cp "$ROOT/examples/send-webhooks" "$T/work/"
cp "$ROOT/examples/send-webhooks" "$T/work/examples/"
# The commands as a user runs them: sluice on the PATH, curl trusting the server,
# no config installed, and a run directory of this test's own (the runs of tests
# beside it are this user's too, and `sluice stat` shows the latest).  The README
# first, then every doc with commands, in one working directory.
docs=("$ROOT/README.md")
for d in "$ROOT"/docs/*.md; do docs+=("$d"); done
PATH="$BUILD_DIR:$PATH" SLUICE_LIB="$PRELOAD" CURL_CA_BUNDLE="$T/cert.pem" XDG_RUNTIME_DIR="$T/xdg" \
	python3 "$HELPERS/readme_commands.py" "$T/work" "$T/arrivals,$T/arrivals.8000" "${docs[@]}" >"$T/out" 2>&1 ||
	fail "$(cat "$T/out")"
note "$(cat "$T/out")"
[ "$(grep -c '^ran `.*sluice run .*at the server=' "$T/out")" -ge 3 ] || fail "fewer sluice runs held at the server than the README and docs have: $(cat "$T/out")"
grep -q '^ran `for .*sluice acquire.*at the server=3 ' "$T/out" || fail "the acquire loop was not held to its rate: $(cat "$T/out")"
echo "ok"

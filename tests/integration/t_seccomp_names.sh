#!/usr/bin/env bash
# tier: parallel
# sluice run --seccomp learns the names a static program looks up in the host
# file, which a static or Go program reads itself (docs/programs.md, "What reaches what"):
# `*.test` patterns and `per = host` keys match a static Go program's connects as
# they match a dynamic one's.  The host file is the test's own, bind-mounted over
# /etc/hosts in a mount namespace of its own (nothing on the machine changes):
#   127.0.0.1 localhost / api.test     (one address, two names: the one a
#   127.0.0.2 b.test                    pattern wants is chosen)
# Judged at the destination: SYNs spaced by the rate, per name where keyed.
. "$(dirname "$0")/lib.sh"

GO="$BUILD_DIR/tests/goclient"
[ -x "$GO" ] || fail "$GO is missing (make test builds it; scripts/deps.sh installs golang-go)"
command -v unshare >/dev/null || fail "unshare (util-linux) is missing"
start_server --also 127.0.0.2
cat >"$T/hosts" <<EOF
127.0.0.1 localhost
127.0.0.1 api.test
127.0.0.2 b.test
EOF
# in_hosts CMD...: CMD with the test's host file as /etc/hosts.
in_hosts() {
	unshare -m sh -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' sh "$T/hosts" "$@"
}
start_witness syn "$PORT" "$T/syn"

# *.test: the Go program's connects to api.test match by name.
write_config "$T/p.ini" <<EOF
[tests]
match = *.test:$PORT
rate = 5/s
max_wait = 1m
EOF
out=$(in_hosts "$SLUICE" run -v -c "$T/p.ini" -- "$GO" "http://api.test:$PORT/go" 6 2 2>"$T/p.err") ||
	fail "Go to api.test: $out $(cat "$T/p.err")"
[ "$out" = "done 6 0" ] || fail "Go to api.test: $out"
[ "$(grep -c "seccomp connect 127.0.0.1:$PORT (api.test): go" "$T/p.err")" -eq 6 ] ||
	fail "api.test did not match every connect: $(cat "$T/p.err")"
expect_spaced "$T/syn" 200 6 "Go to api.test matched by *.test"

# Without the host file's name nothing matches: the same program goes unheld.
out=$("$SLUICE" run --seccomp -v -c "$T/p.ini" -- "$GO" "http://127.0.0.1:$PORT/go" 3 1 2>"$T/n.err") ||
	fail "Go to 127.0.0.1: $out"
grep -q "seccomp connect 127.0.0.1:$PORT.*: go" "$T/n.err" && fail "an unnamed address matched *.test: $(cat "$T/n.err")"

# per = host: api.test and b.test each their own queue at 5/s - spaced 200 ms per
# name, both at once in one run.
write_config "$T/k.ini" <<EOF
[per-name]
match = *.test:$PORT
per = host
rate = 5/s
max_wait = 1m
EOF
kill "$WITNESS_PID"
WITNESS_KEY=dst start_witness syn "$PORT" "$T/keyed"
in_hosts "$SLUICE" run --seccomp -v -c "$T/k.ini" -- sh -c '
	"$1" "http://api.test:$2/a" 5 1 >"$3.a" & a=$!
	"$1" "http://b.test:$2/b" 5 1 >"$3.b"
	wait $a' sh "$GO" "$PORT" "$T/k.out" 2>"$T/k.err" || fail "per = host: $(cat "$T/k.err")"
[ "$(cat "$T/k.out.a") $(cat "$T/k.out.b")" = "done 5 0 done 5 0" ] || fail "per = host: $(cat "$T/k.out."*)"
witnessed "$T/keyed" --interval-ms 200 --group-field 4 --groups 2 --expect 10 --what "api.test and b.test, per = host" ||
	fail "per = host: spacing"
grep -q "(b.test): go" "$T/k.err" || fail "b.test was not named: $(cat "$T/k.err")"
echo "ok"

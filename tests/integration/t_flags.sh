#!/usr/bin/env bash
# tier: check
# The command line as people expect it: flags that contradict each other or mean
# nothing together are refused with a word and exit 2 (never one silently
# ignored), -V prints the version, and a one-liner's errors name the flag that
# caused them, not a temporary file the user never wrote.
. "$(dirname "$0")/lib.sh"

refused() { # WANT CMD...: CMD exits 2 and says WANT on stderr
	local want=$1 rc=0
	shift
	"$@" >"$T/out" 2>"$T/err" || rc=$?
	[ "$rc" = 2 ] || fail "$* exited $rc, not 2 (usage): $(cat "$T/err")"
	grep -qF -- "$want" "$T/err" || fail "$* did not say '$want': $(cat "$T/err")"
	! grep -q "/tmp/sluice-run-" "$T/err" || fail "$* named its temporary config: $(cat "$T/err")"
}

write_config "$T/c.ini" <<EOF
[a]
match = 127.0.0.1:9
rate = 1/s
EOF

refused "--json and --prometheus" "$SLUICE" stat --json --prometheus -c "$T/c.ini"
refused "-c and --segment" "$SLUICE" stat -c "$T/c.ini" --segment "$T/x.segment"
refused "stat takes no argument ('extra')" "$SLUICE" stat -c "$T/c.ini" extra
refused "--remove-unused means nothing" "$SLUICE" segments --remove-unused --remove "$T/x.segment"
refused "-c means nothing" "$SLUICE" segments -c "$T/c.ini" --remove "$T/x.segment"
refused "-q says nothing and -v says every decision" "$SLUICE" run -q -v -c "$T/c.ini" -- true
refused "--seccomp and --no-seccomp" "$SLUICE" run --seccomp --no-seccomp -c "$T/c.ini" -- true
refused "-c and a one-liner" "$SLUICE" run -c "$T/c.ini" --match 127.0.0.1:9 --rate 1/s -- true
refused "-c and a one-liner" "$SLUICE" check -c "$T/c.ini" --match 127.0.0.1:9 --rate 1/s
refused "--redis and a one-liner" "$SLUICE" check --redis --match 127.0.0.1:9 --rate 1/s
refused "--keys lists every key" "$SLUICE" check --keys -c "$T/c.ini"

# One-liner errors, by flag.
refused "sluice run: --rate 0/s: rate:" "$SLUICE" run --match 127.0.0.1:9 --rate 0/s -- true
refused "sluice run: the one-liner needs --match" "$SLUICE" run --rate 1/s -- true
refused "sluice run: the one-liner needs --rate" "$SLUICE" run --match 127.0.0.1:9 -- true
refused "sluice run: --burst 3: burst is for leaky-bucket and token-bucket" \
	"$SLUICE" run --match 127.0.0.1:9 --rate 5/s --strategy fixed-window --burst 3 -- true
refused "sluice check: --tolerance 2m: tolerance: 2m: at most 1m" \
	"$SLUICE" check --match 127.0.0.1:9 --rate 5/s --tolerance 2m

# -V, as --version.
[ "$("$SLUICE" -V)" = "$("$SLUICE" --version)" ] || fail "sluice -V is not --version"
"$SLUICED" -V | grep -q "^sluiced [0-9]" || fail "sluiced -V does not print the version"
echo "ok"

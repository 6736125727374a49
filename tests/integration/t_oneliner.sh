#!/usr/bin/env bash
# tier: parallel
# One-liners (docs/commands.md, "One-liners"): `sluice run --match HOST:PORT --rate R -- cmd`
# shapes cmd without a config file, as trickle users expect; the private config it
# makes is gone when it ends; `sluice check` with the same options prints the
# section to paste into a file.  Witness: kernel SYN times at the destination.
. "$(dirname "$0")/lib.sh"

start_server
start_witness syn "$PORT" "$T/arrivals"
export TMPDIR="$T/tmp"
mkdir "$TMPDIR"

# Four curl processes at 5/s: 8 connections, 200 ms apart at the destination.
"$SLUICE" run --match "127.0.0.1:$PORT" --rate 5/s --max-wait 30s -- sh -c '
	for p in 1 2 3 4; do
		( for i in 1 2; do curl -sS -o /dev/null "http://127.0.0.1:$1/p$p-$i" || exit 1; done ) &
	done
	wait' _ "$PORT" || fail "the one-liner's command failed"
expect_spaced "$T/arrivals" 200 8 "one-liner connects"
[ -z "$(ls -A "$TMPDIR")" ] || fail "the one-liner left files behind: $(ls -A "$TMPDIR")"

# Concurrency alone, and a bad value refused before anything runs.
"$SLUICE" run --match "127.0.0.1:$PORT" --concurrency 1 -- curl -sS -o /dev/null "http://127.0.0.1:$PORT/c" ||
	fail "--concurrency alone"
: >"$T/arrivals"
out=$("$SLUICE" run --match "127.0.0.1:$PORT" --rate fast -- true 2>&1) && fail "--rate fast was taken"
grep -q "rate: bad rate" <<<"$out" || fail "a bad --rate did not say why: $out"
out=$("$SLUICE" run --match "127.0.0.1:$PORT;x" --rate 5/s -- true 2>&1) && fail "a ';' in --match was taken"
grep -q "not a value a config can hold" <<<"$out" || fail "--match with ';': $out"
out=$("$SLUICE" run -c /nonexistent.ini --match x --rate 5/s -- true 2>&1) && fail "-c with a one-liner"
grep -q "do not mix" <<<"$out" || fail "-c with a one-liner: $out"

# sluice check prints the section the same options make, and it checks as a file.
"$SLUICE" check --match "127.0.0.1:$PORT" --rate 5/s --per address --max-wait 10s >"$T/section.ini" ||
	fail "sluice check with a one-liner"
grep -qx "\[cli\]" "$T/section.ini" && grep -qx "rate = 5/s" "$T/section.ini" && grep -qx "per = address" "$T/section.ini" ||
	fail "the printed section: $(cat "$T/section.ini")"
"$SLUICE" check -c "$T/section.ini" >/dev/null || fail "the printed section does not check as a file"
echo "ok"

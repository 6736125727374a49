#!/usr/bin/env bash
# tests/run.sh [unit|check|test]: run one tier of the tests (docs/developing.md).
#
#   unit   the cmocka programs (build/tests/test_*), two at a time
#   check  unit, then the integration tests whose verdicts never depend on time
#          ("# tier: check"), three at a time
#   test   unit, then every integration test in two lanes at once, one test in
#          each - a core each on this two-core machine: the tests whose verdicts a
#          loaded machine could fail - a floor on delivery, a wait that must be
#          short ("# tier: serial") - in one, the rest ("# tier: check" and
#          "# tier: parallel") in the other, at a lower priority (nice 5), so a
#          serial test has a core to itself whenever it asks for one.
#
# Every integration test names its tier in a line "# tier: NAME"; one that does
# not fails.  ONLY=PART runs only the integration tests whose file name has PART.
# Each test has a time limit; the last line is the summary CI reads: "N passed,
# N failed".
set -u
cd "$(dirname "$0")/.."
# Debian's programs first, as scripts/deps.sh installs them (tests/integration/lib.sh).
export PATH="/usr/bin:/bin:/usr/sbin:/sbin${PATH:+:$PATH}"
BUILD=${BUILD:-build}
export BUILD
tier=${1:-test}
case "$tier" in
unit | check | test) ;;
*) echo "usage: tests/run.sh [unit|check|test]" >&2; exit 2 ;;
esac

if [ -n "${SAN:-}" ]; then
	# sluice, sluiced and the unit tests carry ASan+UBSan; the shim UBSan (see the
	# Makefile); t_asan_shim.sh runs libsluice-asan.so with libasan preloaded.
	export SLUICE_TEST_LIBASAN=$(${CC:-cc} -print-file-name=libasan.so)
	# verify_asan_link_order=0: our ASan programs may run with the (UBSan) shim
	# preloaded ahead of their runtime, e.g. `sluice run -- sluice acquire`.
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:verify_asan_link_order=0
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

# Each test's output and verdict go to files here: the lanes are subshells.
R=$(mktemp -d "${TMPDIR:-/tmp}/sluice-run.XXXXXX") || exit 1
trap 'rm -rf "$R"' EXIT

# run_one NAME LIMIT CMD...: run a test, print its line when it ends.
run_one() {
	local name=$1 limit=$2 slug=${1//\//_}
	shift 2
	local start=$SECONDS rc
	timeout -k 5 "$limit" "$@" >"$R/$slug.out" 2>&1
	rc=$?
	[ $rc -eq 124 ] && echo "TIMEOUT after ${limit}s" >>"$R/$slug.out"
	if [ $rc -eq 0 ]; then
		printf 'ok   %-36s %3ds\n' "$name" $((SECONDS - start))
		echo "$name" >>"$R/passed"
	else
		printf 'FAIL %-36s %3ds\n' "$name" $((SECONDS - start))
		echo "$name" >>"$R/failed"
	fi
}

# pool JOBS CMD...: each later argument is a test; JOBS of them run at once.
pool() {
	local jobs=$1 t
	shift
	for t; do
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
		integration "$t" &
	done
	wait
}

integration() {
	run_one "integration/$(basename "$1" .sh)" 240 bash "$1"
}

fail_now() {
	echo "FAIL $1"
	echo "$1" >>"$R/failed"
}

echo "== unit tests"
# A unit test is named after the module it tests: tests/unit/test_X.c tests a
# src/*/X.c.
for src in tests/unit/test_*.c; do
	module=$(basename "$src" .c)
	module=${module#test_}
	compgen -G "src/*/$module.c" >/dev/null || fail_now "unit/$(basename "$src" .c): no src/*/$module.c"
done
units=()
for t in "$BUILD"/tests/test_*; do units+=("$t"); done
for t in "${units[@]}"; do
	while [ "$(jobs -rp | wc -l)" -ge 2 ]; do wait -n; done
	run_one "unit/$(basename "$t")" 120 "$t" &
done
wait

if [ "$tier" != unit ]; then
	serial=() others=()
	for t in tests/integration/t_*.sh; do
		[ -n "${ONLY:-}" ] && [[ "$t" != *"$ONLY"* ]] && continue
		case "$(sed -n 's/^# tier: \([a-z]*\).*/\1/p' "$t" | head -1)" in
		check) others+=("$t") ;;
		parallel) [ "$tier" = test ] && others+=("$t") ;;
		serial) [ "$tier" = test ] && serial+=("$t") ;;
		*) fail_now "integration/$(basename "$t" .sh): no '# tier: check|parallel|serial' line" ;;
		esac
	done
	if [ "$tier" = check ]; then
		echo "== integration tests that judge no timing (${#others[@]}, three at a time)"
		(pool 3 "${others[@]}")
	else
		echo "== integration tests: ${#serial[@]} in one lane, ${#others[@]} in the other"
		(for t in "${serial[@]}"; do integration "$t"; done) &
		(renice -n 5 -p $BASHPID >/dev/null; for t in "${others[@]}"; do integration "$t"; done) &
		wait
	fi
fi

echo
if [ -s "$R/failed" ]; then
	while read -r name; do
		[ -f "$R/${name//\//_}.out" ] || continue
		echo "--- $name"
		tail -40 "$R/${name//\//_}.out" | sed 's/^/     | /'
	done <"$R/failed"
	printf 'failed: %s\n' "$(tr '\n' ' ' <"$R/failed")"
fi
passed=$(cat "$R/passed" 2>/dev/null | wc -l)
failed=$(cat "$R/failed" 2>/dev/null | wc -l)
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

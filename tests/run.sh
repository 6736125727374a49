#!/usr/bin/env bash
# Run every test: the cmocka unit tests, then the integration scripts.  Each test
# has a time limit; the last line is the summary CI reads: "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
# Debian's programs first, as scripts/deps.sh installs them (tests/integration/lib.sh).
export PATH="/usr/bin:/bin:/usr/sbin:/sbin${PATH:+:$PATH}"
BUILD=${BUILD:-build}
export BUILD

if [ -n "${SAN:-}" ]; then
	# sluice, sluiced and the unit tests carry ASan+UBSan; the shim UBSan (see the
	# Makefile); t_asan_shim.sh runs libsluice-asan.so with libasan preloaded.
	export SLUICE_TEST_LIBASAN=$(${CC:-cc} -print-file-name=libasan.so)
	# verify_asan_link_order=0: our ASan programs may run with the (UBSan) shim
	# preloaded ahead of their runtime, e.g. `sluice run -- sluice acquire`.
	export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:verify_asan_link_order=0
	export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

passed=0
failed=0
failures=()

run_one() {
	local name=$1 limit=$2
	shift 2
	local start=$SECONDS out rc
	out=$(timeout -k 5 "$limit" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		printf 'ok   %-36s %3ds\n' "$name" $((SECONDS - start))
	else
		failed=$((failed + 1))
		failures+=("$name")
		[ $rc -eq 124 ] && out="$out"$'\n'"TIMEOUT after ${limit}s"
		printf 'FAIL %-36s %3ds\n' "$name" $((SECONDS - start))
		printf '%s\n' "$out" | tail -40 | sed 's/^/     | /'
	fi
}

echo "== unit tests"
# Each unit test is named after the core module it tests (the Makefile finds them).
for src in tests/unit/test_*.c; do
	module=$(basename "$src" .c)
	module=${module#test_}
	if [ ! -f "src/core/$module.c" ]; then
		failed=$((failed + 1))
		failures+=("unit/$(basename "$src" .c)")
		echo "FAIL $src: no src/core/$module.c (a unit test is named after its module)"
	fi
done
for t in "$BUILD"/tests/test_*; do
	run_one "unit/$(basename "$t")" 120 "$t"
done

echo "== integration tests"
for t in tests/integration/t_*.sh; do
	[ -n "${ONLY:-}" ] && [[ "$t" != *"$ONLY"* ]] && continue
	run_one "integration/$(basename "$t" .sh)" 180 bash "$t"
done

echo
[ $failed -gt 0 ] && printf 'failed: %s\n' "${failures[*]}"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

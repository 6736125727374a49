#!/usr/bin/env bash
# tier: parallel
# Libraries opened with RTLD_DEEPBIND are shaped (src/shim/deepbind.c): PHP's curl
# extension (curl_exec) beside file_get_contents, and a C host that dlopens a
# library the way PHP does, at 5/s against a real server, judged at the
# destination (SYN times).  The hook keeps dlopen's meaning: a library found only
# through its caller's RUNPATH still loads, with or without RTLD_DEEPBIND, and the
# second case - one the shim cannot bind for it - is said, with --seccomp as the
# way out.
. "$(dirname "$0")/lib.sh"

start_server
write_config "$T/s.ini" <<EOF2
[web]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF2
start_witness syn "$PORT" "$T/syn.arrivals"
run() { "$SLUICE" run -c "$T/s.ini" -- "$@"; }

# PHP: four curl_exec requests, then two file_get_contents, one process.
cat >"$T/fetch.php" <<EOF2
<?php
for (\$i = 0; \$i < 4; \$i++) {
	\$c = curl_init("http://127.0.0.1:$PORT/curl\$i");
	curl_setopt(\$c, CURLOPT_RETURNTRANSFER, true);
	if (curl_exec(\$c) === false) { fwrite(STDERR, curl_error(\$c) . "\n"); exit(1); }
}
for (\$i = 0; \$i < 2; \$i++) file_get_contents("http://127.0.0.1:$PORT/fgc\$i");
EOF2
run php "$T/fetch.php" >"$T/php.out" 2>&1 || fail "php: $(cat "$T/php.out")"
[ "$(grep -c ' /curl[0-3]$' "$SERVER_LOG")" -eq 4 ] || fail "not every curl_exec request arrived"
expect_spaced "$T/syn.arrivals" 200 6 "PHP curl_exec and file_get_contents"

# A C host and its library: RTLD_DEEPBIND by path.
mkdir -p "$T/lib"
cc -O1 -Wall -shared -fPIC -DDEEPBIND_LIB -o "$T/lib/libdbfetch.so" "$HELPERS/deepbind.c" ||
	fail "cannot build the library"
cc -O1 -Wall -o "$T/deepbind" "$HELPERS/deepbind.c" -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib' -ldl ||
	fail "cannot build the host"
run "$T/deepbind" deep "$T/lib/libdbfetch.so" "$PORT" 5 >"$T/deep.out" 2>&1 ||
	fail "deep: $(cat "$T/deep.out")"
expect_spaced "$T/syn.arrivals" 200 5 "connects from a RTLD_DEEPBIND library"

# By a bare name its caller's RUNPATH finds: loads as without the shim, shaped as
# any library.
run "$T/deepbind" bare "$PORT" 3 >"$T/bare.out" 2>&1 || fail "bare name: $(cat "$T/bare.out")"
expect_spaced "$T/syn.arrivals" 200 3 "connects from a library found by the caller's RUNPATH"

# The same with RTLD_DEEPBIND: it must still load (the caller's search is kept),
# and what the shim cannot bind is said.
run "$T/deepbind" deepbare "$PORT" 2 >"$T/deepbare.out" 2>&1 ||
	fail "RTLD_DEEPBIND by a bare name: $(cat "$T/deepbare.out")"
grep -q 'RTLD_DEEPBIND.*sluice run --seccomp' "$T/deepbare.out" ||
	fail "no word on the library the shim cannot bind: $(cat "$T/deepbare.out")"
# ... and under --seccomp it is shaped.
: >"$T/syn.arrivals"
"$SLUICE" run --seccomp -c "$T/s.ini" -- "$T/deepbind" deepbare "$PORT" 3 >"$T/seccomp.out" 2>&1 ||
	fail "--seccomp: $(cat "$T/seccomp.out")"
expect_spaced "$T/syn.arrivals" 200 3 "the same under --seccomp"
echo "ok"

#!/usr/bin/env bash
# tier: check
# libsluice.so exports exactly the calls listed in src/shim/hooks.def (the list its
# export map is generated from) - each one defined, nothing else visible - links
# only libc (and what glibc splits off), and carries inih inside it, hidden.
. "$(dirname "$0")/lib.sh"

# The names, read from the list itself (not from the generated map).
expected=$(sed -n 's/^SL_HOOK([^,]*, *\([A-Za-z0-9_]*\),.*/\1/p; s/^SL_EXPORT_ONLY(\([A-Za-z0-9_]*\)).*/\1/p' \
	"$ROOT/src/shim/hooks.def" | sort | tr '\n' ' ' | sed 's/ $//')
[ "$(echo "$expected" | wc -w)" -ge 40 ] || fail "could not read the hooks from hooks.def: $expected"
got=$(nm -D --defined-only "$SHIM" | awk '$2 ~ /^[TWDBV]$/ { print $3 }' | sort | tr '\n' ' ' | sed 's/ $//')
[ "$got" = "$expected" ] || fail "libsluice.so exports: $got
hooks.def lists:         $expected"
if readelf -d "$SHIM" | grep NEEDED | grep -v -E 'libc\.so|libdl\.so|libpthread\.so|ld-linux|libasan|libubsan' ; then
	fail "libsluice.so needs more than libc"
fi
nm -D "$SHIM" | grep -q ini_parse && fail "inih symbols leak from libsluice.so"
# inih is inside (a local symbol), not a library to be found at run time.
nm "$SHIM" | grep -q ' t ini_parse_stream$' || fail "inih is not linked into libsluice.so"
note "exports $(echo "$got" | wc -w) calls: $got"
echo "ok"

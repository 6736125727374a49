#!/usr/bin/env bash
# tier: check
# The layers (docs/design.md, "Layers"): no file of a lower layer includes a
# header of a higher one - proto below core, core below progs and the shim, the
# daemon and the supervisor above them, the CLI on top (scripts/layers.py).  The
# checker is also shown a tree where core includes progs' log.h, and must refuse it.
. "$(dirname "$0")/lib.sh"

python3 "$ROOT/scripts/layers.py" "$ROOT" >"$T/tree.out" || fail "$(cat "$T/tree.out")"
note "$(tail -1 "$T/tree.out")"

# A copy with one include out of order: the checker must name it.
mkdir -p "$T/copy"
cp -r "$ROOT/src" "$ROOT/include" "$T/copy/"
sed -i '1i #include "sluice/log.h"' "$T/copy/src/core/admit.c"
python3 "$ROOT/scripts/layers.py" "$T/copy" >"$T/copy.out" && fail "core including progs' log.h passed: $(cat "$T/copy.out")"
grep -q '^src/core/admit.c (core) includes sluice/log.h (progs)' "$T/copy.out" ||
	fail "the checker did not name the include: $(cat "$T/copy.out")"
echo "ok"

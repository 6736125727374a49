#!/usr/bin/env bash
# tier: serial
# The chaos suite at the size CI affords (tests/chaos/chaos.py; `make chaos` runs
# it at full size): kill -9 storms of waiters and lock holders, some reaped late;
# daemon kill/restart; reloads between equal limits in other windows; then
# scribbles on the header, the sections and the lock word; then all of it again
# with both sections keyed (per = address).  Witness: kernel SYN
# timestamps at the destination.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 "$ROOT/tests/chaos/chaos.py" "$BUILD_DIR" "$T" --size ci || fail "chaos"
# The same with both sections keyed: the limits held through the key table.
mkdir "$T/keyed"
/usr/bin/python3 "$ROOT/tests/chaos/chaos.py" "$BUILD_DIR" "$T/keyed" --size ci --keyed || fail "chaos, keyed"
echo "ok"

#!/usr/bin/env bash
# The chaos suite at the size CI affords (tests/chaos/chaos.py; `make chaos` runs
# it at full size): kill -9 storms of waiters and lock holders, some reaped late;
# daemon kill/restart; reloads between equal limits in other windows; then
# scribbles on the header, the sections and the lock word.  Witness: kernel SYN
# timestamps at the destination.
. "$(dirname "$0")/lib.sh"
/usr/bin/python3 "$ROOT/tests/chaos/chaos.py" "$BUILD_DIR" "$T" --size ci || fail "chaos"
echo "ok"

#!/usr/bin/env bash
# tier: check
# `sluice check` and `sluice check --keys` print what the key table says
# (include/sluice/config_keys.def); their output is compared with the files in
# tests/golden, so a change to a key's name, default, help or printing shows in
# review as a change to those files.  To accept a change on purpose:
#   UPDATE_GOLDEN=1 bash tests/integration/t_golden.sh
. "$(dirname "$0")/lib.sh"

cd "$ROOT" || fail "no repository"
golden() { # NAME CMD...: compare CMD's output with tests/golden/NAME
	local name=$1
	shift
	"$@" >"$T/$name" 2>&1 || fail "$* failed: $(cat "$T/$name")"
	if [ -n "${UPDATE_GOLDEN:-}" ]; then
		cp "$T/$name" "tests/golden/$name"
		note "updated tests/golden/$name"
	fi
	diff -u "tests/golden/$name" "$T/$name" >"$T/$name.diff" ||
		fail "$* differs from tests/golden/$name:
$(cat "$T/$name.diff")"
}
golden keys.txt "$SLUICE" check --keys
golden check-sluice.ini.txt "$SLUICE" check -c conf/sluice.ini
golden check-webhooks.ini.txt "$SLUICE" check -c examples/webhooks.ini
echo "ok"

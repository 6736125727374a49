#!/usr/bin/env bash
# tier: check
# Bash completion (dist/bash-completion/sluice, installed by the package): the
# commands, each command's flags - every flag sluice's own usage names, so the
# file cannot fall behind the code - the meters and strategies the config
# parser takes, file names after -c, and the command after `sluice run --`.
. "$(dirname "$0")/lib.sh"

COMPLETION="$(dirname "$0")/../../dist/bash-completion/sluice"
[ -f "$COMPLETION" ] || fail "no completion file at $COMPLETION"

complete_of() { # WORDS...: what completing the last word offers, one a line
	bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
		case $1 in sluiced) _sluiced ;; *) _sluice ;; esac
		printf "%s\n" "${COMPREPLY[@]}"' _ "$COMPLETION" "$@"
}
offers() { # WANT WORDS...: completing WORDS offers WANT
	local want=$1
	shift
	complete_of "$@" | grep -qxF -- "$want" || fail "completing '$*' does not offer $want: $(complete_of "$@" | tr '\n' ' ')"
}

# Every command and every flag of sluice's usage.
"$SLUICE" --help >"$T/usage" 2>&1 || true
for cmd in $(sed -n 's/^ *\(usage: \)\{0,1\}sluice \([a-z]*\) .*/\2/p' "$T/usage" | sort -u); do
	offers "$cmd" sluice ""
	for flag in $(grep -E "^ *(usage: )?sluice $cmd " "$T/usage" | grep -oE -- '(^|[[ |])--?[a-z][a-z-]*' | tr -d '[| ' | sort -u); do
		offers "$flag" sluice "$cmd" -
	done
done
# The one-liner's flags (the usage says "...": they are in its description).
for flag in --match --rate --concurrency --meter --per --strategy --burst --tolerance --max-wait; do
	grep -q -- "$flag" "$T/usage" || fail "sluice's usage no longer names $flag"
	offers "$flag" sluice run -
	offers "$flag" sluice check -
done
# Choices as the parser takes them: each value it lists for a bad one.
for key in meter strategy; do
	"$SLUICE" check --match 127.0.0.1 --rate 1/s --"$key" bogus 2>"$T/err" && fail "--$key bogus accepted"
	for v in $(sed -n 's/.*(want \(.*\))$/\1/p' "$T/err" | tr -d '|'); do
		offers "$v" sluice run --"$key" ""
	done
done
# Files after -c, the command after run --, sluiced's flags.
: >"$T/mine.ini"
offers "$T/mine.ini" sluice stat -c "$T/mi"
offers "curl" sluice run --rate 1/s --match 127.0.0.1 -- cur
for flag in -c -f -n -S -V --version --help; do
	grep -qE -- "(^|[[ |])$flag([] |]|$)" <("$SLUICED" --help 2>&1) || fail "sluiced's usage no longer names $flag"
	offers "$flag" sluiced -
done
echo "ok"

#!/usr/bin/env bash
# tier: parallel
# Who may use the machine's queues (docs/operations.md, "Running it on a machine"): a root
# sluiced with shm_group gives its segment and control socket to that group.  The
# test makes a group and two users (removed at the end):
#  - a member, under `sluice run`, is shaped by the root daemon's queue (the
#    kernel sees its connects at the rate; the daemon counts them);
#  - an outsider is told on stderr what is wrong and how to fix it; its calls
#    wait for the machine's queues and are refused - never shaped by a queue of
#    its own, apart from the machine's (docs/design.md, "Never a silent split") -
#    and with fallback = closed its program is not started.
. "$(dirname "$0")/lib.sh"

[ "$(id -u)" -eq 0 ] || fail "needs root: it makes a group and two users"
grp="slt$$"
member="slm$$"
outsider="slo$$"
groupadd "$grp" || fail "groupadd"
useradd -M -N -s /bin/sh -G "$grp" "$member" || fail "useradd"
useradd -M -N -s /bin/sh "$outsider" || fail "useradd"
drop_users() {
	userdel "$member" 2>/dev/null
	userdel "$outsider" 2>/dev/null
	groupdel "$grp" 2>/dev/null
}
trap 'drop_users; cleanup' EXIT
chmod 755 "$T"

start_server
write_config "$T/g.ini" <<EOF
shm_group = $grp
shm_mode = 0660

[api]
match = 127.0.0.1:$PORT
rate = 5/s
max_wait = 1m
EOF
chmod 644 "$T/g.ini"
start_daemon "$T/g.ini"
ls -l "$CTL" | grep -q " root $grp " || fail "the control socket is not in group $grp: $(ls -l "$CTL")"
start_witness syn "$PORT" "$T/arrivals"
as() { # USER CONFIG CMD...: sluice run as USER, its stderr in $T/err.USER
	local who=$1 cfg=$2
	shift 2
	runuser -u "$who" -- env SLUICE_LIB="$SHIM" "$SLUICE" run -c "$cfg" -- "$@" 2>"$T/err.$who"
}
connects='import socket, sys
for i in range(6):
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()'

# --- a member: the root daemon's queue ---
as "$member" "$T/g.ini" /usr/bin/python3 -c "$connects" "$PORT" || { cat "$T/err.$member"; fail "the member's run failed"; }
grep -q "may not use" "$T/err.$member" && fail "the member was told it may not use the queues"
witnessed "$T/arrivals" --interval-ms 200 --expect 6 --what "a group member's connects" || fail "the member was not shaped"
"$SLUICE" stat --json -c "$T/g.ini" >"$T/g.json" || fail "stat"
[ "$(json_field "$T/g.json" api admitted)" -eq 6 ] || fail "the daemon did not count the member's connects: $(cat "$T/g.json")"

# --- an outsider: told, on stderr, what is wrong and how to fix it; its calls
# refused after max_wait, none unshaped ---
: >"$T/arrivals"
sed -e "s/^max_wait = 1m$/max_wait = 1s/" "$T/g.ini" >"$T/short.ini"
chmod 644 "$T/short.ini"
as "$outsider" "$T/short.ini" /usr/bin/python3 -c 'import socket, sys
got = []
for i in range(2):
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30).close()
        got.append("went")
    except ConnectionRefusedError:
        got.append("refused")
print(" ".join(got))' "$PORT" >"$T/out.$outsider" || { cat "$T/err.$outsider"; fail "the outsider's run failed"; }
cat "$T/err.$outsider"
grep -q "may not use this machine's queues" "$T/err.$outsider" || fail "the outsider was not told"
grep -q "group $grp" "$T/err.$outsider" || fail "the message does not name the group"
grep -q "usermod -aG $grp $outsider" "$T/err.$outsider" || fail "the message does not say how to fix it"
[ "$(cat "$T/out.$outsider")" = "refused refused" ] || fail "the outsider's calls: $(cat "$T/out.$outsider")"
sleep 0.3
[ ! -s "$T/arrivals" ] || fail "an outsider's connect reached the destination unshaped"

# `sluice stat` by the outsider: not "no daemon answers" - it answers, to the group.
runuser -u "$outsider" -- "$SLUICE" stat -c "$T/g.ini" >/dev/null 2>"$T/stat.$outsider"
grep -qF "$outsider may not use the daemon's control socket $CTL (group $grp, mode 0660): sudo usermod -aG $grp $outsider, then log in again" \
	"$T/stat.$outsider" || fail "stat by the outsider: $(cat "$T/stat.$outsider")"
grep -q "no daemon answers" "$T/stat.$outsider" && fail "stat by the outsider blamed the daemon"

# --- with fallback = closed, the outsider's program is not started ---
mkdir -m 777 "$T/w"
sed -e "s/^shm_mode = 0660$/&\nfallback = closed/" "$T/g.ini" >"$T/closed.ini"
chmod 644 "$T/closed.ini"
as "$outsider" "$T/closed.ini" /bin/touch "$T/w/ran" && fail "fallback = closed: sluice run succeeded"
[ -e "$T/w/ran" ] && fail "fallback = closed: the program was started"
grep -q "fallback = closed - the program is not started" "$T/err.$outsider" || fail "closed: not said"
echo "ok"

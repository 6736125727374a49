#!/usr/bin/env bash
# Segments an operator can see and manage (README "Segments"), in an IPC namespace
# of the test's own, so that it sees and removes only what it made:
#  - a segment left by an earlier run, root's with mode 0600, stops a sluiced of
#    another user; the error names its key, shmid, owner and mode and the fix,
#    and so does `sluice stat` for that user;
#  - `sluice segments` lists each segment's key, owner, mode, users, name and config;
#  - `--remove-unused` removes those nobody uses, never an attached one or one made
#    in the last SL_SEGMENT_SETTLE_S seconds;
#  - a `sluice run` killed by SIGKILL leaves its private segment; the next removes it;
#  - `sluice stat` with another config's file says which config made the segment.
if [ -z "${SL_IPC_NS:-}" ]; then
	[ "$(id -u)" -eq 0 ] || { echo "FAIL: needs root (an IPC namespace, another user)"; exit 1; }
	exec env SL_IPC_NS=1 unshare --ipc bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"

chmod 755 "$T"
mkdir -p "$T/nobody"
chown nobody "$T/nobody"
ipcs -m | grep -q '^0x' && fail "the test's own IPC namespace is not empty: $(ipcs -m)"

# --- a root segment left behind, mode 0600 ---
write_config "$T/left.ini" <<EOF
shm_mode = 0600

[a]
match = 127.0.0.1:9
rate = 1/s
EOF
start_daemon "$T/left.ini"
stop_daemon
key=$("$SLUICE" segments --key "$SHM_NAME")
[ "$key" = "$(printf '0x%08x' "$(($(python3 "$HELPERS/segment.py" key "$SHM_NAME") & 0xffffffff))")" ] ||
	fail "sluice segments --key says $key, the tests' own hash otherwise"
shmid=$(ipcs -m | awk -v k="$key" '$1 == k { print $2 }')
[ -n "$shmid" ] || fail "no segment with key $key: $(ipcs -m)"

# Another user's sluiced on the same name: refused, and told why and what to do.
sed -e "s|^control_socket = .*|control_socket = $T/nobody/ctl.sock|" "$T/left.ini" >"$T/nobody/n.ini"
chmod 644 "$T/nobody/n.ini"
runuser -u nobody -- "$SLUICED" -f -c "$T/nobody/n.ini" 2>"$T/nobody.err" &&
	fail "a sluiced of user nobody started on root's 0600 segment"
want="segment $SHM_NAME (System V key $key, shmid $shmid, owner root:root, mode 0600, 0 attached): Permission denied"
grep -qF "$want" "$T/nobody.err" || fail "sluiced's error does not name the segment: $(cat "$T/nobody.err")"
grep -qF "sudo sluice segments --remove-unused" "$T/nobody.err" || fail "sluiced's error gives no fix: $(cat "$T/nobody.err")"
runuser -u nobody -- "$SLUICE" stat --shm "$SHM_NAME" >/dev/null 2>"$T/stat.err" && fail "nobody read a 0600 segment"
grep -qF "cannot read $want" "$T/stat.err" || fail "stat's error does not name the segment: $(cat "$T/stat.err")"
runuser -u nobody -- "$SLUICE" segments >"$T/nobody.list" || fail "sluice segments as nobody"
grep -q "1 segments this user may not read" "$T/nobody.list" || fail "as nobody: $(cat "$T/nobody.list")"

# --- in use: a running daemon ---
write_config "$T/live.ini" <<EOF
[b]
match = 127.0.0.1:9
rate = 1/s
EOF
sed -i -e "s|^shm_name = .*|shm_name = $SHM_NAME-live|" -e "s|^control_socket = .*|control_socket = $T/live.sock|" \
	"$T/live.ini"
EXTRA_SHMS+=("$SHM_NAME-live")
start_daemon "$T/live.ini"

# --- a sluice run killed by SIGKILL: its private segment stays ---
write_config "$T/run.ini" <<EOF
[c]
match = 127.0.0.1:9
rate = 1/s
EOF
sed -i -e '/^shm_name/d' -e '/^control_socket/d' "$T/run.ini"
"$SLUICE" run -c "$T/run.ini" -- sleep 30 &
run_pid=$!
for _ in $(seq 50); do
	"$SLUICE" segments | grep -q "/sluice-run-$run_pid " && break
	sleep 0.1
done
prog=$(pgrep -P "$run_pid")
kill -9 "$run_pid" $prog # its program too: it would keep the segment attached
wait "$run_pid" 2>/dev/null
run_key=$("$SLUICE" segments --key "/sluice-run-$run_pid")
for _ in $(seq 50); do
	ipcs -m | awk -v k="$run_key" '$1 == k && $6 == 0 { f = 1 } END { exit !f }' && break
	sleep 0.1
done

"$SLUICE" segments >"$T/list" || fail "sluice segments"
note "$(cat "$T/list")"
line() { awk -v n="$1" '$9 == n' "$T/list"; }
line "$SHM_NAME" | grep -qE "^$key +$shmid +root:root +0600 +[0-9]+\.[0-9]M +0 .* none +$SHM_NAME +$T/left.ini$" ||
	fail "the segment left behind, as listed: $(line "$SHM_NAME")"
line "$SHM_NAME-live" | grep -qE " 0660 .* 1 .* $DAEMON_PID +$SHM_NAME-live +$T/live.ini$" ||
	fail "the live segment, as listed: $(line "$SHM_NAME-live")"
line "/sluice-run-$run_pid" | grep -qE " 0 .* none +/sluice-run-$run_pid +$T/run.ini$" ||
	fail "the killed run's segment, as listed: $(cat "$T/list")"

# Made moments ago: nothing is removed yet (one being made is not attached yet).
"$SLUICE" segments --remove-unused >"$T/rm0" || fail "--remove-unused: $(cat "$T/rm0")"
grep -qx "0 removed (none was unused)" "$T/rm0" || fail "removed a segment made moments ago: $(cat "$T/rm0")"
[ "$(ipcs -m | grep -c '^0x')" -eq 3 ] || fail "three segments expected: $(ipcs -m)"

sleep 11 # SL_SEGMENT_SETTLE_S
# The next sluice run removes the killed one's segment, and only it.
"$SLUICE" run -c "$T/run.ini" -- true || fail "a sluice run after the killed one"
ipcs -m | awk '{ print $1 }' | grep -q "$run_key" &&
	fail "the next sluice run left the killed one's segment: $(ipcs -m)"
[ "$(ipcs -m | grep -c '^0x')" -eq 2 ] || fail "the next run removed more than the killed one's: $(ipcs -m)"

# --- the other config's file ---
sed -e "s|^control_socket = .*|control_socket = $T/none.sock|" "$T/live.ini" >"$T/other.ini"
"$SLUICE" stat -c "$T/other.ini" >/dev/null 2>"$T/other.err" || fail "stat with the other config: $(cat "$T/other.err")"
grep -qF "segment $SHM_NAME-live was made from $T/live.ini, not $T/other.ini" "$T/other.err" ||
	fail "stat did not say the segment serves another config: $(cat "$T/other.err")"
"$SLUICE" stat -c "$T/live.ini" >"$T/stat.out" || fail "stat"
grep -qE "^segment $SHM_NAME-live \(System V key 0x[0-9a-f]{8}, shmid [0-9]+, owner root:root, mode 0660, 1 attached\)$" \
	"$T/stat.out" || fail "stat does not name its segment: $(head -3 "$T/stat.out")"

# --- remove the unused: the one left behind goes, the live one stays ---
"$SLUICE" segments --remove-unused >"$T/rm1" || fail "--remove-unused: $(cat "$T/rm1")"
grep -qx "removed shmid $shmid ($SHM_NAME)" "$T/rm1" || fail "--remove-unused: $(cat "$T/rm1")"
grep -qx "1 removed" "$T/rm1" || fail "--remove-unused removed more or less than one: $(cat "$T/rm1")"
ipcs -m | grep -q "^$key " && fail "the unused segment is still there: $(ipcs -m)"
"$SLUICE" stat -c "$T/live.ini" >/dev/null || fail "the live daemon's segment went with it"
echo "ok"

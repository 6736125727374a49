# An sshd of the test's own on loopback (sourced after lib.sh): its own host key,
# a key for the client, and no PAM; it lives as long as the test.
# start_sshd: sets SSHD_PORT and SSH_CMD (the ssh command line that reaches it).
start_sshd() {
	local d="$T/sshd" port
	mkdir -p "$d" /run/sshd
	ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" || fail "ssh-keygen host key"
	ssh-keygen -q -t ed25519 -N '' -f "$d/user_key" || fail "ssh-keygen user key"
	cp "$d/user_key.pub" "$d/authorized_keys"
	for _ in 1 2 3 4 5; do
		port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		cat >"$d/config" <<EOF2
Port $port
ListenAddress 127.0.0.1
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PidFile $d/sshd.pid
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
LogLevel ERROR
EOF2
		/usr/sbin/sshd -D -f "$d/config" -E "$d/log" &
		BG_PIDS+=($!)
		SSHD_PORT=$port
		SSH_CMD="ssh -i $d/user_key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p $port"
		for _ in $(seq 50); do
			$SSH_CMD root@127.0.0.1 true 2>/dev/null && return 0
			sleep 0.1
		done
	done
	fail "sshd did not start: $(cat "$d/log")"
}

#!/usr/bin/env python3
"""What systemd does for sluiced.service that a shell stand-in cannot: its file
descriptor store (FileDescriptorStoreMax=1), for t_deb's fake systemctl.

    fake_service.py start USER -- CMD...   start CMD as USER, handing it what the
                                           store keeps (LISTEN_FDS, LISTEN_FDNAMES,
                                           LISTEN_PID) and NOTIFY_SOCKET; prints
                                           its pid
    fake_service.py flush                  forget what the store keeps (a stop
                                           with no restart queued)

The store is a process of its own, started at the first `start`: it keeps what
FDSTORE=1 messages on NOTIFY_SOCKET carry, by FDNAME, and hands it over on its
own socket.  Nothing here is sluice's: systemd's protocol as sd_notify(3) and
sd_listen_fds(3) describe it.
"""
import array
import os
import pwd
import select
import socket
import sys
import time

NOTIFY = "/run/fake-notify.sock"
STORE = "/run/fake-store.sock"


def recv_fds(sock, size=4096):
    msg, anc, _f, _a = sock.recvmsg(size, socket.CMSG_SPACE(64 * 4))
    fds = []
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a = array.array("i")
            a.frombytes(data[: len(data) - len(data) % a.itemsize])
            fds.extend(a)
    return msg, fds


def serve():
    kept = {}  # name -> fd
    note = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    store = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    for path in (NOTIFY, STORE):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    note.bind(NOTIFY)
    os.chmod(NOTIFY, 0o666)
    store.bind(STORE)
    store.listen(8)
    while True:
        ready, _, _ = select.select([note, store], [], [])
        if note in ready:
            msg, fds = recv_fds(note)
            fields = dict(l.split("=", 1) for l in msg.decode(errors="replace").split("\n") if "=" in l)
            name = fields.get("FDNAME", "stored")
            if fields.get("FDSTOREREMOVE") == "1" and name in kept:
                os.close(kept.pop(name))
            if fields.get("FDSTORE") == "1" and fds:
                if name in kept:
                    os.close(kept[name])
                kept[name] = fds.pop(0)
            for fd in fds:
                os.close(fd)
        if store in ready:
            c, _ = store.accept()
            with c:
                try:
                    answer(c, kept)
                except OSError:
                    pass  # the asker went away (ensure_store's probe does)


def answer(c, kept):
    what = c.recv(64).decode().strip()
    if what == "flush":
        for fd in kept.values():
            os.close(fd)
        kept.clear()
        c.sendall(b"ok\n")
    elif what == "take":
        names = list(kept)
        line = (":".join(names) + "\n").encode()
        if names:
            c.sendmsg([line], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                array.array("i", [kept[n] for n in names]).tobytes())])
        else:
            c.sendall(line)


def ensure_store():
    if os.path.exists(STORE):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(STORE)
            s.close()
            return
        except OSError:
            pass
    if os.fork() == 0:
        os.setsid()
        null = os.open(os.devnull, os.O_RDWR)
        errors = os.open("/var/log/fake-store.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        for fd in (0, 1):
            os.dup2(null, fd)
        os.dup2(errors, 2)
        serve()
        os._exit(0)
    for _ in range(100):
        if os.path.exists(STORE):
            return
        time.sleep(0.02)


def ask(what):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(STORE)
    s.sendall(what.encode() + b"\n")
    msg, fds = recv_fds(s)
    s.close()
    return msg.decode().strip(), fds


def main():
    if sys.argv[1] == "flush":
        if os.path.exists(STORE):
            ask("flush")
        return 0
    user, cmd = sys.argv[2], sys.argv[4:]
    ensure_store()
    names, fds = ask("take")
    pw = pwd.getpwnam(user)
    pid = os.fork()
    if pid == 0:
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, 3 + i)
        os.closerange(3 + len(fds), 1024)
        env = dict(os.environ, NOTIFY_SOCKET=NOTIFY)
        if fds:
            env.update(LISTEN_FDS=str(len(fds)), LISTEN_FDNAMES=names, LISTEN_PID=str(os.getpid()))
        os.setgroups([])
        os.setgid(pw.pw_gid)
        os.setuid(pw.pw_uid)
        os.execve(cmd[0], cmd, env)
    print(pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())

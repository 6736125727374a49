#!/usr/bin/env python3
"""TLS turns for meter = requests: a local TLS server that answers each line with
"pong LINE", and a client that takes N turns on one connection.

  tls_turns.py serve CERT KEY PORTFILE LIFETIME
  tls_turns.py talk PORT N        (checks every answer; exits 1 on any error)
"""
import os
import socket
import ssl
import sys
import threading


def serve(cert, key, portfile, lifetime):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    with open(portfile + ".tmp", "w") as f:
        f.write("%d\n" % s.getsockname()[1])
    os.rename(portfile + ".tmp", portfile)
    threading.Timer(float(lifetime), lambda: os._exit(0)).start()

    def one(c):
        try:
            with ctx.wrap_socket(c, server_side=True) as t:
                f = t.makefile("rwb")
                for line in f:
                    f.write(b"pong " + line)
                    f.flush()
        except (OSError, ssl.SSLError):
            pass

    while True:
        c, _ = s.accept()
        threading.Thread(target=one, args=(c,), daemon=True).start()


def talk(port, n):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=30) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as t:
            f = t.makefile("rwb")
            for i in range(n):
                f.write(b"ping %d\n" % i)
                f.flush()
                answer = f.readline()
                if answer != b"pong ping %d\n" % i:
                    sys.exit("turn %d: %r" % (i, answer))


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(*sys.argv[2:6])
    else:
        talk(int(sys.argv[2]), int(sys.argv[3]))

#!/usr/bin/env python3
"""grpc_client.py PORT SECONDS [AT:PATH]...: calls /test.Svc/Call on 127.0.0.1:PORT
(one channel: one HTTP/2 connection) one after another for SECONDS, each with the
path "nN"; each cue's PATH goes AT seconds after the start.  Prints how many calls
ended with each status code; exits 1 on a status other than OK and
RESOURCE_EXHAUSTED, or an OK answer that is not the server's.
"""
import sys
import time

import grpc


def main():
    port, seconds = sys.argv[1], float(sys.argv[2])
    cues = sorted((float(c.split(":", 1)[0]), c.split(":", 1)[1]) for c in sys.argv[3:])
    counts = {}
    with grpc.insecure_channel("127.0.0.1:%s" % port) as ch:
        call = ch.unary_unary("/test.Svc/Call")
        start = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            path = "n%d" % n
            if cues and time.monotonic() - start >= cues[0][0]:
                path = cues.pop(0)[1]
            n += 1
            try:
                answer = call(path.encode(), timeout=30)
                if answer != b"hello " + path.encode():
                    print("bad answer", answer, file=sys.stderr)
                    return 1
                code = "OK"
            except grpc.RpcError as e:
                code = e.code().name
                if code != "RESOURCE_EXHAUSTED":
                    print(path, code, e.details(), file=sys.stderr)
                    return 1
            counts[code] = counts.get(code, 0) + 1
    print(counts)
    return 0


if __name__ == "__main__":
    sys.exit(main())

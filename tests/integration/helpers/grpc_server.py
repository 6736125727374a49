#!/usr/bin/env python3
"""A local gRPC server (python3-grpcio) with one generic unary method, /test.Svc/Call:
the request's bytes are a path, as answers_server.py reads them: "exhaust" answers
RESOURCE_EXHAUSTED (with "exhaust?ms=N", grpc-retry-pushback-ms: N in its trailers),
anything else OK with b"hello " + the path.  Each call is appended to --log as
"REALTIME_NS 4 0 PATH" when its handler starts (after the kernel had it: a late stamp
can only hide a request, never make one up), and an exhausting answer as
"REALTIME_NS answered PATH" just before it is written.  Port 0 picks a free port,
written to --port-file; exits after --lifetime seconds.
"""
import argparse
import threading
import time
from concurrent import futures

import grpc

lock = threading.Lock()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--answered", required=True)
    ap.add_argument("--lifetime", type=float, default=120)
    args = ap.parse_args()

    def call(request, context):
        now = time.time_ns()
        path = request.decode("latin-1")
        with lock, open(args.log, "a") as f:
            f.write("%d 4 0 %s\n" % (now, path))
        if path.startswith("exhaust"):
            meta = []
            if "?ms=" in path:
                meta.append(("grpc-retry-pushback-ms", path.split("?ms=")[1]))
            context.set_trailing_metadata(meta)
            with lock, open(args.answered, "a") as f:
                f.write("%d answered %s\n" % (time.time_ns(), path))
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down")
        return b"hello " + request

    handler = grpc.method_handlers_generic_handler(
        "test.Svc", {"Call": grpc.unary_unary_rpc_method_handler(call)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(args.port_file, "w") as f:
        f.write("%d\n" % port)
    server.wait_for_termination(timeout=args.lifetime)


if __name__ == "__main__":
    main()

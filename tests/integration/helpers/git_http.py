#!/usr/bin/env python3
"""Git's smart HTTP protocol on loopback, for the transparency matrix: each request
is handed to `git http-backend` as a CGI program (a connection per request).

Usage: git_http.py PROJECT_ROOT PORT_FILE [LIFETIME_SECONDS]
"""
import http.server
import os
import subprocess
import sys
import threading


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def _cgi(self):
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = dict(os.environ, GIT_PROJECT_ROOT=self.server.root, GIT_HTTP_EXPORT_ALL="1",
                   REQUEST_METHOD=self.command, PATH_INFO=path, QUERY_STRING=query,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)), REMOTE_ADDR=self.client_address[0],
                   GATEWAY_INTERFACE="CGI/1.1", SERVER_PROTOCOL="HTTP/1.0")
        if self.headers.get("Git-Protocol"):
            env["HTTP_GIT_PROTOCOL"] = self.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.split(b"\r\n"):
            k, _, v = line.decode(errors="replace").partition(":")
            if k.lower() == "status":
                status = int(v.split()[0])
            elif k:
                headers.append((k, v.strip()))
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    do_GET = _cgi
    do_POST = _cgi

    def log_message(self, *args):
        pass


def main():
    root, port_file = sys.argv[1], sys.argv[2]
    lifetime = float(sys.argv[3]) if len(sys.argv) > 3 else 600
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.root = root
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(port_file + ".tmp", port_file)
    threading.Timer(lifetime, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    main()

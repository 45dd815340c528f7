#!/usr/bin/env python3
"""A local HTTP server for the download tests (tests/testing/http_server.hpp starts it).

Usage: fetch_server.py ROOT. Binds 127.0.0.1 on a free port, prints the port on stdout, then
serves the files under ROOT (HTTP/1.0, byte ranges honoured: `Range: bytes=N-` gets a 206):

  any request without a User-Agent  403 (so a served file proves the client sent one)
  /ua                               200, the request's User-Agent as the body
  /redirect/PATH                    302 to /PATH
  /drop/PATH                        a request from byte 0 gets the Content-Length of the whole
                                    file but only its first half, then the connection is closed;
                                    a resumed request (Range) gets the rest
  /dropalways/PATH                  every response is cut after half of what it announces
  anything missing                  404
"""
import http.server
import os
import re
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    root = "."

    def log_message(self, *args):  # quiet: the test reads stdout for the port only
        pass

    def do_GET(self):
        if not self.headers.get("User-Agent"):
            self.send_error(403, "a User-Agent header is required")
            return
        path = self.path.split("?", 1)[0]
        if path == "/ua":
            self.send_bytes(self.headers["User-Agent"].encode(), 0, cut=False)
        elif path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", path[len("/redirect"):])
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path.startswith("/drop/"):
            self.send_file(path[len("/drop"):], cut_fresh=True)
        elif path.startswith("/dropalways/"):
            self.send_file(path[len("/dropalways"):], cut_always=True)
        else:
            self.send_file(path)

    def send_file(self, path, cut_fresh=False, cut_always=False):
        local = os.path.join(self.root, path.lstrip("/"))
        if ".." in path.split("/") or not os.path.isfile(local):
            self.send_error(404, "no such file")
            return
        with open(local, "rb") as f:
            data = f.read()
        start = 0
        m = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if m:
            start = int(m.group(1))
        self.send_bytes(data, start, cut=cut_always or (cut_fresh and start == 0))

    def send_bytes(self, data, start, cut):
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        if cut:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(2)  # the client sees the transfer end early
        else:
            self.wfile.write(body)


class Server(http.server.HTTPServer):
    def handle_error(self, request, client_address):  # a connection cut on purpose is no error
        pass


def main():
    Handler.root = sys.argv[1]
    server = Server(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()

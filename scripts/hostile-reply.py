#!/usr/bin/env python3
"""A hostile OVSDB server for measuring what one bad reply costs a client.

    scripts/hostile-reply.py SOCKET string|nest BYTES

Listens on the unix socket SOCKET, reads one request and answers it with the start of
a reply followed by BYTES of `a` inside a string that never closes (`string`) or of `[`
that never close (`nest`). For example, beside it:

    /usr/bin/time -f '%M KiB' target/debug/examples/ovsdb-client list-dbs unix:SOCKET

(docs/benchmarks.md has the figures).
"""
import json
import os
import socket
import sys


def main():
    path, kind, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    conn, _ = server.accept()
    request = b""
    while b"}" not in request:
        request += conn.recv(4096)
    rid = json.loads(request.decode())["id"]
    start = '{"id":%d,"result":' % rid + ('"' if kind == "string" else "")
    conn.sendall(start.encode())
    chunk = (b"a" if kind == "string" else b"[") * (1 << 20)
    sent = 0
    try:
        while sent < total:
            conn.sendall(chunk)
            sent += len(chunk)
    except OSError as e:
        print(f"the client stopped reading: {e}", file=sys.stderr)
    conn.close()
    print(f"{sent} bytes sent after the reply's start", file=sys.stderr)


if __name__ == "__main__":
    main()

"""A small threaded HTTP server for WSGI apps, on the driver: the metrics port's.

Engine-neutral. What prometheus_client's `start_http_server` does (a daemon thread, one
thread a request, the address family the host needs, no request log on stderr), with
the app given, so that the port serves the health endpoints beside `/metrics`
(prometheus.py). Only the standard library's public API.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line on stderr per request (a scrape every few seconds)."""


def serve(host: str, port: int, app: Callable[..., Any]) -> WSGIServer:
    """Serve `app` on host:port (0: a free port) from a daemon thread; OSError if the port
    cannot be bound. Stop with `shutdown()` and `server_close()`."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True
        address_family = family

    server = make_server(str(address[0]), port, app, Server, handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server

"""MetricsServer: /metrics over HTTP on its own named thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from node_daemon.listen import ListenAddress

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Render = Callable[[], bytes]


def _handler(render: Render) -> type[BaseHTTPRequestHandler]:
    class MetricsHandler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            try:
                body = render()
            except Exception:
                log.exception("rendering /metrics failed")
                self.send_error(500, "rendering metrics failed; see the daemon's log")
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("metrics: " + format, *args)

    return MetricsHandler


class MetricsServer:
    def __init__(self, address: ListenAddress, render: Render) -> None:
        self._server = ThreadingHTTPServer((address.host, address.port), _handler(render))
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.address = ListenAddress(address.host, self.port)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="gpufleet-metrics", daemon=True
        )

    def start(self) -> None:
        self._thread.start()
        log.info("serving Prometheus metrics on http://%s/metrics", self.address)

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

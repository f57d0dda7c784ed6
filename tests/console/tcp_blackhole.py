"""A TCP forwarder that can turn into a black hole: it stops forwarding, and closes nothing.

Between the console and a daemon it stands for a network that silently drops
packets (a cut fibre behind a switch, a firewall change, a hung host's NIC):
every socket stays open, the kernels on both sides still acknowledge what
arrives, yet nothing reaches the other end, not even a FIN or a reset. Only
keepalive pings and deadlines can tell, which is what the tests prove.
"""

from __future__ import annotations

import select
import socket
import threading

CHUNK = 65536
POLL_S = 0.1  # how often a blocked thread looks whether the forwarder is closing


class BlackHoleProxy:
    """Listens on 127.0.0.1 (`address`) and forwards each connection to `upstream`."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._start(self._accept, "blackhole-accept")

    def hold(self) -> None:
        """Forward nothing from now on, in either direction; close nothing."""
        self._flowing.clear()

    def resume(self) -> None:
        """Forward again, what was held first."""
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()  # release the threads waiting to forward
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                sock.close()
        for thread in self._threads:
            thread.join(5)

    def _start(self, target: object, name: str, *args: socket.socket) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)  # type: ignore[arg-type]
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                if not self._readable(self._listener):
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):
                continue  # closing (a closed socket's descriptor is -1: ValueError)
            try:
                server = socket.create_connection(self._upstream)
            except OSError:
                client.close()  # the upstream is down: as a router would, say so (RST/FIN)
                continue
            with self._lock:
                self._sockets += [client, server]
            self._start(self._pump, "blackhole-up", client, server)
            self._start(self._pump, "blackhole-down", server, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while self._wait_flowing() and self._readable(source, retry=True):
                data = source.recv(CHUNK)
                if not data or not self._wait_flowing():
                    break
                sink.sendall(data)
            if self._wait_flowing():
                sink.shutdown(socket.SHUT_WR)  # an end, passed on only while flowing
        except (OSError, ValueError):
            pass  # the other side is gone, or we are closing

    def _wait_flowing(self) -> bool:
        """Wait while held; False once closing."""
        self._flowing.wait()
        return not self._closed.is_set()

    def _readable(self, sock: socket.socket, retry: bool = False) -> bool:
        """Whether `sock` has something to read (within POLL_S; with `retry`, until it has)."""
        while not self._closed.is_set():
            if select.select([sock], [], [], POLL_S)[0]:
                return True
            if not retry:
                return False
        return False

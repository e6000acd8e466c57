"""A TCP forwarder whose live connections can be cut on demand, to break a client's connection
to the server mid-bake (the client's ZeroMQ socket then reconnects through it)."""

from __future__ import annotations

import selectors
import socket
import threading


class DroppingProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.drops = 0
        self.discarded_bytes = 0  # server -> client bytes thrown away since blackhole()
        self._blackhole = False
        self._upstreams: set[socket.socket] = set()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.listener, selectors.EVENT_READ)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def blackhole(self) -> None:
        """From now until the next drop_all, throw away what the server sends (counted in
        ``discarded_bytes``): data certainly lost in transit, however fast either side is."""
        self.discarded_bytes = 0
        self._blackhole = True

    def drop_all(self) -> None:
        """Cut every connection open now (new ones are accepted afterwards). Shutting the sockets
        down from here also unblocks the pump thread if it is stuck in sendall."""
        with self._lock:
            sockets = list(self._peers)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._blackhole = False
        self.drops += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for sock in list(self._peers):
            sock.close()
        self.listener.close()

    def _close_pair(self, sock: socket.socket) -> None:
        with self._lock:
            other = self._peers.pop(sock, None)
            if other is not None:
                self._peers.pop(other, None)
            self._upstreams.discard(sock)
            self._upstreams.discard(other)
        for s in (sock, other):
            if s is None:
                continue
            try:
                self._selector.unregister(s)
            except (KeyError, ValueError):
                pass
            s.close()

    def _pump(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.02):
                sock = key.fileobj
                if sock is self.listener:
                    try:
                        client, _ = self.listener.accept()
                        upstream = socket.create_connection(self.target)
                    except OSError:
                        continue
                    for s in (client, upstream):
                        s.setblocking(True)
                        self._selector.register(s, selectors.EVENT_READ)
                    with self._lock:
                        self._peers[client], self._peers[upstream] = upstream, client
                        self._upstreams.add(upstream)
                    continue
                other = self._peers.get(sock)
                if other is None:
                    continue
                try:
                    data = sock.recv(1 << 16)
                    if data and self._blackhole and sock in self._upstreams:
                        self.discarded_bytes += len(data)
                        continue
                    if data:
                        other.sendall(data)
                        continue
                except OSError:
                    pass
                self._close_pair(sock)

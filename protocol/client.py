"""Plain-Python client for the Tangle solver server (no Blender needed).

::

    from protocol.client import SolverClient
    with SolverClient("tcp://127.0.0.1:5555", timeout=30.0) as client:
        job = client.submit(scene)
        for result in job.frames():   # FrameResult(frame, positions {id: float32 (N, 3)}, stats)
            ...

A client object and its jobs belong to one thread (ZeroMQ sockets are not thread-safe); the one
exception is :meth:`Job.cancel`, which another thread may call while ``frames()`` is iterating:
the iterating thread then sends the cancel within about 0.1 s.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import zmq

from . import messages
from .errors import ProtocolError, SolverError
from .keys import load_key_pair, load_public_key, require_curve
from .wire import MAX_MESSAGE_BYTES, Message, decode, encode

__all__ = ["SolverClient", "Job", "FrameResult", "SolverError", "ProtocolError"]

HEARTBEAT_S = 1.0  # ping the server after this long without hearing from it (at most timeout / 3)
DRIVE_WINDOW = 4  # drive messages are sent at most this many frames ahead of the last result
RECEIVE_HWM = 64  # messages zmq buffers for this client before the server has to wait
_POLL_SLICE_S = 0.1  # how often a waiting frames() loop checks for a cross-thread cancel

DriveCallable = Callable[[int], dict]


@dataclass(frozen=True)
class FrameResult:
    """One simulated frame: ``positions[id]`` is a read-only float32 array of shape (N, 3) in
    metres (world space); ``stats`` holds the solver's per-frame figures; ``checkpoint`` is the
    solver state at the end of this frame ({"frame", "groups"}, ARCHITECTURE §3) when the job was
    submitted with ``checkpoint_every`` and this frame carries one, else None."""

    frame: int
    positions: dict[str, np.ndarray]
    stats: dict
    checkpoint: dict | None = None


def _raise_for_error(message: Message) -> None:
    body = message.body
    raise SolverError(body["code"], body["message"], object=body.get("object"), frame=body.get("frame"))


class Job:
    """A submitted simulation. Created by :meth:`SolverClient.submit` once the server accepted it."""

    def __init__(
        self, client: "SolverClient", job_id: str, drive: DriveCallable | None, resume_frame: int | None = None
    ):
        self._client = client
        self.id = job_id
        self._drive = drive
        self.resume_frame = resume_frame  # frame of the checkpoint this job continues from, if any
        self.frame_start: int | None = None
        self.frame_end: int | None = None
        self.animated: list[str] = []
        self.progress: dict | None = None  # body of the last `progress` message
        self.stats: dict | None = None  # stats of the last frame received
        self.done_info: dict | None = None  # body of `done` once the job finished
        self._results: deque[FrameResult] = deque()
        self._next_frame: int | None = None
        self._drive_sent_upto: int | None = None
        self._finished = False
        self._cancel_sent = False
        self._cancel_requested = threading.Event()
        self._iterating_thread: int | None = None
        self._resume_asked_for: int | None = None
        self._resume_asked_at = float("-inf")

    @property
    def finished(self) -> bool:
        return self._finished

    # -- internal: message handling ---------------------------------------------------------

    def _on_accepted(self, body: dict) -> None:
        self.frame_start = body["frame_start"]
        self.frame_end = body["frame_end"]
        self.animated = list(body["animated"])
        # drive covers frame_start .. frame_end (ARCHITECTURE §2); a resumed job starts after its checkpoint
        first = self.frame_start if self.resume_frame is None else self.resume_frame + 1
        self._next_frame = first
        self._drive_sent_upto = first - 1

    def _handle(self, message: Message) -> None:
        kind, body = message.type, message.body
        if kind == messages.FRAME:
            frame = body["frame"]
            if frame < self._next_frame:
                return  # a duplicate sent again after a resume
            if frame > self._next_frame:
                self._request_resume()  # frames were lost on a broken connection
                return
            positions = {oid: obj["positions"] for oid, obj in body["objects"].items()}
            result = FrameResult(
                frame=frame, positions=positions, stats=body["stats"], checkpoint=body.get("checkpoint")
            )
            self._results.append(result)
            self.stats = body["stats"]
            self._next_frame += 1
            if not self._cancel_sent:
                self._send_drives(result.frame + DRIVE_WINDOW)
        elif kind == messages.PROGRESS:
            self.progress = body
        elif kind == messages.PONG:
            # the pong travels behind everything the server sent before it: if it reports a frame
            # (or the final message) that never arrived, those were lost
            if self._next_frame is None:
                return
            if body.get("frames_sent", self._next_frame - 1) >= self._next_frame or body.get("ended"):
                self._request_resume()
        elif kind == messages.DONE:
            if body["last_frame"] >= self._next_frame:
                self._request_resume()  # `done` overtook lost frames; the server sends it again after them
                return
            self.done_info = body
            self._finish()
        elif kind == messages.ERROR:
            self._finish()
            _raise_for_error(message)

    def _request_resume(self) -> None:
        """Ask the server to send again everything from the next expected frame (idempotent; at
        most once per expected frame and ping interval)."""
        now = time.monotonic()
        if self._resume_asked_for == self._next_frame and now - self._resume_asked_at < self._client._ping_interval:
            return
        self._resume_asked_for = self._next_frame
        self._resume_asked_at = now
        self._client._send(messages.resume(self.id, self._next_frame))

    def _send_drives(self, upto: int) -> None:
        if not self.animated:
            return
        last = min(upto, self.frame_end)
        while self._drive_sent_upto < last:
            frame = self._drive_sent_upto + 1
            try:
                objects = self._drive(frame)
                missing = [oid for oid in self.animated if oid not in (objects or {})]
                if missing:
                    raise SolverError(
                        "no_drive", f"drive callable returned no data for animated object(s) {missing}", frame=frame
                    )
                self._client._send(messages.drive(self.id, frame, objects))  # ProtocolError if unencodable
            except BaseException:
                self._abandon()
                raise
            self._drive_sent_upto = frame

    def _finish(self) -> None:
        self._finished = True
        self._client._forget(self.id)

    def _abandon(self) -> None:
        """Stop the job on the server without waiting (used when the caller's code failed)."""
        if not self._finished and not self._cancel_sent:
            self._cancel_sent = True
            try:
                self._client._send(messages.cancel(self.id))
            except SolverError:
                pass
        self._finish()

    def _pump(self, wait_s: float, since: float) -> None:
        """Receive and handle at most one message for this job, waiting up to ``wait_s``."""
        message = self._client._receive(self.id, wait_s, since)
        if message is not None:
            self._handle(message)

    # -- public -------------------------------------------------------------------------------

    def frames(self) -> Iterator[FrameResult]:
        """Yield every frame frame_start..frame_end in order as the server produces it.

        Raises :class:`SolverError` on a server error (frames yielded before stay valid) or when
        the server is silent for longer than the client's timeout. After :meth:`cancel`, frames
        that arrived before the server's ``done`` are still yielded, then iteration stops.
        Leaving the loop early (``break``) cancels the job on the server without waiting.
        """
        if self._iterating_thread is not None:
            raise RuntimeError(f"job {self.id}: frames() is already being iterated")
        self._iterating_thread = threading.get_ident()
        try:
            if not self._cancel_sent and not self._finished:
                self._send_drives(self._next_frame + DRIVE_WINDOW)
            since = time.monotonic()  # the silence clock restarts whenever the caller hands back control
            while True:
                if self._results:
                    yield self._results.popleft()
                    since = time.monotonic()
                    continue
                if self._finished:
                    return
                if self._cancel_requested.is_set() and not self._cancel_sent:
                    self._cancel_sent = True
                    self._client._send(messages.cancel(self.id))
                self._pump(_POLL_SLICE_S, since)
        except GeneratorExit:
            if self._client._owned_by_caller():
                self._abandon()
            raise
        finally:
            self._iterating_thread = None

    def cancel(self) -> dict | None:
        """Ask the server to stop this job after the frame it is computing.

        Called from the thread that uses the client, it waits for the server's ``done`` and
        returns its body (``cancelled`` is False if the job had already completed). Called from
        any other thread it only flags the request (``frames()`` sends it within ~0.1 s) and
        returns None: the socket is never touched from two threads.
        """
        self._cancel_requested.set()
        if self._finished:
            return self.done_info
        iterating = self._iterating_thread
        if (iterating is not None and iterating != threading.get_ident()) or not self._client._owned_by_caller():
            return None
        if not self._cancel_sent:
            self._cancel_sent = True
            self._client._send(messages.cancel(self.id))
        since = time.monotonic()
        while not self._finished:
            self._pump(_POLL_SLICE_S, since)
        return self.done_info


class SolverClient:
    """A DEALER connection to one solver server.

    ``timeout`` [s]: longest silence tolerated from the server while waiting for it (the client
    pings every ``HEARTBEAT_S`` while waiting, and any message resets the clock).
    ``server_public_key`` (Z85, 40 chars, or the path of the server's ``server.key``) switches on
    CURVE encryption; the client then uses the key pair from ``client_secret_key_file`` (its
    ``*.key_secret`` certificate, see :mod:`protocol.keys`) or a fresh, unauthorized one.
    """

    def __init__(
        self,
        address: str,
        timeout: float = 30.0,
        *,
        client_name: str = "tangle-python",
        server_public_key: str | bytes | None = None,
        client_secret_key_file: str | None = None,
    ):
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.address = address
        self.timeout = float(timeout)
        self._ping_interval = min(HEARTBEAT_S, self.timeout / 3.0)
        self.client_name = client_name
        self.server_info: dict | None = None
        self._seq = 0
        self._jobs: dict[str, Job] = {}
        self._inbox: dict[str | None, deque[Message]] = {None: deque()}
        self._last_heard = float("-inf")
        self._last_ping = float("-inf")
        self._last_sent = float("-inf")  # the server frees the jobs of a client silent for --client-silence
        self._socket_thread: int | None = None  # the thread that last used the socket
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self._socket.setsockopt(zmq.SNDTIMEO, int(self.timeout * 1000))
        self._socket.setsockopt(zmq.RCVHWM, RECEIVE_HWM)
        # a fixed routing id lets the server recognise this client after a reconnect
        self._socket.setsockopt(zmq.ROUTING_ID, b"T" + os.urandom(15))
        try:
            if server_public_key is not None:
                self._configure_curve(server_public_key, client_secret_key_file)
            self._socket.connect(address)
        except (zmq.ZMQError, OSError, ValueError, RuntimeError) as exc:
            self.close()
            raise SolverError("connect", f"cannot connect to {address}: {exc}") from exc

    def _configure_curve(self, server_public_key: str | bytes, client_secret_key_file: str | None) -> None:
        require_curve()
        if client_secret_key_file is not None:
            public, secret = load_key_pair(client_secret_key_file)
        else:
            public, secret = zmq.curve_keypair()
        self._socket.curve_serverkey = load_public_key(server_public_key)
        self._socket.curve_publickey = public
        self._socket.curve_secretkey = secret

    # -- context manager ------------------------------------------------------------------------

    def __enter__(self) -> "SolverClient":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket without lingering; never blocks."""
        if not self._socket.closed:
            self._socket.close(linger=0)
        self._context.term()

    # -- transport --------------------------------------------------------------------------------

    def _owned_by_caller(self) -> bool:
        """True unless another thread is the one using this client's socket."""
        return self._socket_thread in (None, threading.get_ident())

    def _send(self, message: Message) -> None:
        if self._socket.closed:
            raise SolverError("closed", f"the connection to {self.address} was closed")
        self._socket_thread = threading.get_ident()
        self._seq += 1
        message.seq = self._seq
        self._last_sent = time.monotonic()
        try:
            self._socket.send_multipart(encode(message), copy=False)
        except zmq.Again:
            raise SolverError(
                "timeout", f"could not send to the solver server at {self.address} within {self.timeout:g} s"
            ) from None

    def _route(self, message: Message) -> None:
        if message.type == messages.PONG and message.job is None:
            return
        if message.job is None:
            self._inbox[None].append(message)
        elif message.job in self._jobs:
            self._inbox.setdefault(message.job, deque()).append(message)
        # messages for jobs this client no longer tracks (late pongs, stale errors) are dropped

    def _receive(self, job_id: str | None, wait_s: float, since: float) -> Message | None:
        """Next message for ``job_id`` (None: messages without a job), or None after ``wait_s``.

        A job-less ``error`` is returned to a job waiter too. Raises SolverError("timeout") if
        the server has been silent for ``timeout`` seconds, counting from ``since`` at the latest.
        """
        self._socket_thread = threading.get_ident()
        deadline = time.monotonic() + wait_s
        while True:
            now = time.monotonic()
            if now - self._last_sent >= self._ping_interval and now - self._last_ping >= self._ping_interval:
                self._ping(job_id, now)  # a client that only receives (or reads slowly) must still be heard
            box = self._inbox.get(job_id)
            if box:
                return box.popleft()
            if job_id is not None and any(m.type == messages.ERROR for m in self._inbox[None]):
                errors = [m for m in self._inbox[None] if m.type == messages.ERROR]
                self._inbox[None].remove(errors[0])
                return errors[0]
            now = time.monotonic()
            silent_for = now - max(self._last_heard, since)
            if silent_for >= self.timeout:
                raise SolverError(
                    "timeout", f"the solver server at {self.address} did not answer within {self.timeout:g} s"
                )
            if silent_for >= self._ping_interval and now - self._last_ping >= self._ping_interval:
                self._ping(job_id, now)
            if now >= deadline:
                return None
            wait = min(deadline - now, self._ping_interval, self.timeout - silent_for)
            if self._socket.poll(max(1, int(wait * 1000)), zmq.POLLIN):
                frames = self._socket.recv_multipart(copy=False)
                self._last_heard = time.monotonic()
                try:
                    message = messages.validate(decode(frames), "s2c")
                except ProtocolError as exc:
                    raise SolverError("protocol", f"undecodable message from {self.address}: {exc}") from None
                self._route(message)

    def _ping(self, job_id: str | None, now: float) -> None:
        self._last_ping = now
        self._send(messages.ping(job_id if job_id in self._jobs else None))

    def _wait_for(self, job_id: str | None, since: float) -> Message:
        while True:
            message = self._receive(job_id, HEARTBEAT_S, since)
            if message is not None:
                return message

    # -- public -------------------------------------------------------------------------------------

    def hello(self) -> dict:
        """Handshake; returns the server's ``welcome`` body (backend, device, limits)."""
        self._send(messages.hello(self.client_name))
        since = time.monotonic()
        while True:
            message = self._wait_for(None, since)
            if message.type == messages.ERROR:
                _raise_for_error(message)
            if message.type == messages.WELCOME:
                self.server_info = message.body
                return message.body

    def submit(
        self,
        scene: dict,
        drive: DriveCallable | None = None,
        job_id: str | None = None,
        *,
        checkpoint_every: int | None = None,
        resume: dict | None = None,
    ) -> Job:
        """Send ``scene`` (DESIGN §2) and wait until the server accepted it.

        ``drive(frame) -> {object_id: {"matrix_world": (4, 4), "vertices": (N, 3)?}}`` supplies
        the animated objects' state for frames frame_start .. frame_end; it is called at most
        ``DRIVE_WINDOW`` frames ahead of the last result. ``checkpoint_every=N``: every N-th frame
        (counted from frame_start) and the last one carry ``FrameResult.checkpoint``. ``resume``: a
        checkpoint received earlier (for the same scene); the job then yields frames
        ``resume["frame"] + 1 .. frame_end`` only. Raises SolverError (``bad_scene`` with the object
        named, also for a checkpoint that does not fit the scene; ``no_drive`` if the scene is
        animated and ``drive`` is None, ...).
        """
        if checkpoint_every is not None and (
            isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1
        ):
            raise ValueError(f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
        resume_frame = None
        if resume is not None:
            frame = resume.get("frame") if isinstance(resume, dict) else None
            if isinstance(frame, bool) or not isinstance(frame, (int, np.integer)):
                raise ValueError("resume must be a checkpoint {'frame': int, 'groups': {...}} received from the server")
            resume_frame = int(resume["frame"])
            resume = {**resume, "frame": resume_frame}
        if self.server_info is None:
            self.hello()
        job_id = job_id or uuid.uuid4().hex
        if job_id in self._jobs and not self._jobs[job_id].finished:
            raise ValueError(f"job id {job_id!r} is already in use by this client")
        job = Job(self, job_id, drive, resume_frame)
        self._jobs[job_id] = job
        self._inbox[job_id] = deque()
        try:
            message = messages.submit(scene, job=job_id, checkpoint_every=checkpoint_every, resume=resume)
            self._send(message)  # ProtocolError names an unencodable value
        except BaseException:
            self._forget(job_id)
            raise
        since = time.monotonic()
        while True:
            message = self._wait_for(job_id, since)
            if message.type == messages.ERROR:
                self._forget(job_id)
                _raise_for_error(message)
            if message.type == messages.ACCEPTED:
                job._on_accepted(message.body)
                break
        if job.animated and drive is None:
            job._abandon()
            raise SolverError(
                "no_drive", f"the scene marks {job.animated} as animated but submit() was given no drive callable"
            )
        return job

    def _forget(self, job_id: str) -> None:
        self._jobs.pop(job_id, None)
        self._inbox.pop(job_id, None)

"""The solver server's ROUTER loop (main thread): decode, dispatch, job bookkeeping.

All ZeroMQ calls happen on the thread that runs :meth:`SolverServer.serve`. Job worker threads
hand their messages over through ``jobs.Outbox`` (a ``queue.Queue`` whose ``put`` also wakes the
poll through a pipe), drained between polls (10 ms at most). Outgoing
messages wait in a per-peer queue while the peer's pipe is full (``ROUTER_MANDATORY`` makes a
full pipe visible as ``EAGAIN`` and a vanished peer as ``EHOSTUNREACH``). A vanished peer's jobs
keep running for ``peer_grace_s``: a client that reconnects with the same routing id
(``ROUTER_HANDOVER``) carries on, and asks with ``resume`` for frames lost on the broken
connection; each job keeps its last sent frames (``jobs.SentFrames``) for that. A peer that is
reachable but silent (no message, not even a ping) for ``client_silence_s`` while it has running
jobs is treated as dead too: a live client pings while it waits for results.

``checkpoint_dir``: every job also writes its checkpoint every ``checkpoint_every`` frames (and at
its last frame) under that folder (``protocol.checkpoint_files.CheckpointDirectory``), so a
plain-Python client can resume after the server process died (docs/reliability.md).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq

from protocol import messages
from protocol.checkpoint_files import CheckpointDirectory
from protocol.errors import ProtocolError
from protocol.keys import AUTHORIZED_DIR, SERVER_NAME, load_key_pair, require_curve
from protocol.wire import MAX_MESSAGE_BYTES, PROTOCOL_VERSION, Message, decode, encode

from . import __version__
from .jobs import (
    FRAME_WINDOW,
    MAX_PENDING_DRIVES,
    Job,
    JobKey,
    Outbox,
    Outgoing,
    SimulationFactory,
    default_simulation_factory,
)

log = logging.getLogger("tangle.server")

DEFAULT_BIND = "tcp://127.0.0.1:5555"
HEARTBEAT_S = 1.0
POLL_MS = 10
MAX_RECEIVES_PER_TICK = 256
IDLE_PEER_FORGET_S = 300.0  # a peer with no jobs and nothing to send is forgotten after this
SEND_HWM = 64  # messages zmq queues per peer (a frame is 2 messages: frame + progress)
MAX_PENDING_REPLIES = 256  # replies (pong, error, welcome) queued for a peer that does not read
PEER_GRACE_S = 30.0  # an unreachable peer's jobs keep running this long (it may reconnect)
UNREACHABLE_RETRY_S = 0.1  # how often sending to an unreachable peer is retried
RESULT_TTL_S = 120.0  # an ended job's kept frames and final message stay available for resume
CLIENT_SILENCE_S = 60.0  # a reachable client silent this long (it pings while waiting) loses its running jobs
DISK_CHECKPOINT_EVERY = 10  # default frames between disk checkpoints with --checkpoint-dir


@dataclass
class Peer:
    identity: bytes
    client: str = "?"
    seq: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    pending: deque = field(default_factory=deque)  # Outgoing items not yet accepted by zmq
    unreachable_since: float | None = None  # first failed send (EHOSTUNREACH) since the last success
    retry_at: float = 0.0


class SolverServer:
    """``SolverServer(bind, backend).serve()`` runs until :meth:`stop` (thread-safe) is called.

    ``keys_dir`` switches on CURVE (Ironhouse, layout of :mod:`protocol.keys`): traffic is
    encrypted and only clients whose public keys are in ``keys_dir/authorized_clients`` (read at
    start) can connect; others get no answer at all.
    """

    def __init__(
        self,
        bind: str,
        backend: Any,
        *,
        simulation_factory: SimulationFactory = default_simulation_factory,
        max_jobs: int = 4,
        keys_dir: str | Path | None = None,
        peer_grace_s: float = PEER_GRACE_S,
        client_silence_s: float = CLIENT_SILENCE_S,
        checkpoint_dir: str | Path | None = None,
        checkpoint_every: int = DISK_CHECKPOINT_EVERY,
        context: zmq.Context | None = None,
    ):
        if checkpoint_every < 1:
            raise ValueError(f"checkpoint_every must be at least 1, got {checkpoint_every}")
        self.backend = backend
        self.peer_grace_s = peer_grace_s
        self.client_silence_s = client_silence_s
        self.checkpoint_every = checkpoint_every
        self.checkpoints = CheckpointDirectory(checkpoint_dir) if checkpoint_dir is not None else None
        self.max_jobs = max_jobs
        self._factory = simulation_factory
        self._own_context = context is None
        self._context = context or zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        self._socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._socket.setsockopt(zmq.SNDHWM, SEND_HWM)
        self._socket.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a reconnecting client keeps its routing id
        self._authenticator = None
        try:
            if keys_dir is not None:
                self._setup_curve(Path(keys_dir))
            self._socket.bind(bind)
        except (zmq.ZMQError, OSError, ValueError, RuntimeError) as exc:
            self._close_sockets()
            raise OSError(f"cannot start the solver server on {bind}: {exc}") from exc
        self.address = self._socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self._stop = threading.Event()
        self._outbox = Outbox()
        self._peers: dict[bytes, Peer] = {}
        self._jobs: dict[JobKey, Job] = {}  # running
        self._ended: dict[JobKey, tuple[Job, float]] = {}  # ended: (job, expiry) for resume
        self._welcome_body = messages.welcome(
            server=f"tangle-solver {__version__}",
            backend=backend.name,
            device=backend.device_info(),
            max_message_bytes=MAX_MESSAGE_BYTES,
            heartbeat_s=HEARTBEAT_S,
            frame_window=FRAME_WINDOW,
            max_pending_drives=MAX_PENDING_DRIVES,
            max_jobs=max_jobs,
        ).body

    def _setup_curve(self, keys_dir: Path) -> None:
        from zmq.auth.thread import ThreadAuthenticator

        require_curve()
        secret_file = keys_dir / f"{SERVER_NAME}.key_secret"
        authorized = keys_dir / AUTHORIZED_DIR
        if not secret_file.is_file():
            raise OSError(f"no server key {secret_file} (create one with: python -m solver_server --generate-keys DIR)")
        if not authorized.is_dir() or not any(authorized.glob("*.key")):
            raise OSError(f"no authorized client public keys (*.key) in {authorized}")
        public, secret = load_key_pair(secret_file)
        self._authenticator = ThreadAuthenticator(self._context, log=logging.getLogger("tangle.auth"))
        self._authenticator.start()
        self._authenticator.configure_curve(domain="*", location=str(authorized))
        self._socket.curve_secretkey = secret
        self._socket.curve_publickey = public
        self._socket.curve_server = True
        log.info("CURVE on: %d authorized client key(s) in %s", len(list(authorized.glob("*.key"))), authorized)

    def _close_sockets(self) -> None:
        self._socket.close(linger=0)
        if self._authenticator is not None:
            self._authenticator.stop()
            self._authenticator = None
        if self._own_context:
            self._context.term()

    # -- lifecycle --------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`serve` to return (safe from signal handlers and other threads)."""
        self._stop.set()

    def serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._socket, zmq.POLLIN)
        poller.register(self._outbox.wake_fd, zmq.POLLIN)
        try:
            while not self._stop.is_set():
                events = dict(poller.poll(POLL_MS))
                if self._socket in events:
                    self._receive_all()
                self._drain_outbox()
                self._flush()
                self._housekeeping()
        finally:
            self._shutdown()

    def _shutdown(self) -> None:
        for job in self._jobs.values():
            job.cancel()
        deadline = time.monotonic() + 2.0
        for job in self._jobs.values():
            job.join(max(0.0, deadline - time.monotonic()))
        self._jobs.clear()
        self._close_sockets()
        self._outbox.close()
        log.info("solver server stopped")

    # -- receiving ----------------------------------------------------------------------------------

    def _receive_all(self) -> None:
        for _ in range(MAX_RECEIVES_PER_TICK):
            try:
                frames = self._socket.recv_multipart(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            identity = frames[0].bytes
            peer = self._peers.get(identity)
            if peer is None:
                peer = self._peers[identity] = Peer(identity)
            peer.last_seen = time.monotonic()
            peer.retry_at = 0.0  # it talks again: retry sending to it at once
            try:
                message = messages.validate(decode(frames[1:]), "c2s")
            except ProtocolError as exc:
                log.warning("peer %s sent a bad message: %s", identity.hex(), exc)
                self._reply(peer, messages.error(exc.code, exc.message))
                continue
            try:
                self._dispatch(peer, message)
            except ProtocolError as exc:
                self._reply(peer, messages.error(exc.code, exc.message, job=message.job))
            except Exception as exc:  # a server bug must not take every other client down with it
                log.exception("handling %s from peer %s failed", message.type, identity.hex())
                self._reply(peer, messages.error("internal", f"{type(exc).__name__}: {exc}", job=message.job))

    def _dispatch(self, peer: Peer, message: Message) -> None:
        kind = message.type
        if kind == messages.HELLO:
            self._on_hello(peer, message)
        elif kind == messages.SUBMIT:
            self._on_submit(peer, message)
        elif kind == messages.DRIVE:
            job = self._running_job(peer, message)
            if job is not None:
                try:
                    job.add_drive(message.body["frame"], message.body["objects"])
                except ProtocolError as exc:
                    self._end_job(job, messages.error(exc.code, exc.message, job=job.id))
        elif kind == messages.CANCEL:
            job = self._running_job(peer, message)
            if job is not None:
                log.info("job %s: cancel requested", job.id)
                job.cancel()
        elif kind == messages.RESUME:
            self._on_resume(peer, message)
        elif kind == messages.PING:
            self._on_ping(peer, message)
        # pong: only a heartbeat

    def _on_hello(self, peer: Peer, message: Message) -> None:
        if message.body["protocol"] != PROTOCOL_VERSION:
            raise ProtocolError(
                "version_mismatch",
                f"client speaks protocol {message.body['protocol']}, this server speaks {PROTOCOL_VERSION}",
            )
        peer.client = message.body["client"]
        log.info("hello from %s (%s)", peer.client, peer.identity.hex())
        self._reply(peer, Message(messages.WELCOME, body=self._welcome_body))

    def _on_submit(self, peer: Peer, message: Message) -> None:
        job_id = message.body.get("job") or uuid.uuid4().hex
        if not job_id or len(job_id) > messages.MAX_JOB_ID_LENGTH:
            raise ProtocolError("bad_message", f"job id must be 1..{messages.MAX_JOB_ID_LENGTH} characters")
        key = (peer.identity, job_id)
        if key in self._jobs:
            self._reply(peer, messages.error("bad_message", f"job {job_id!r} is already running", job=job_id))
            return
        if len(self._jobs) >= self.max_jobs:
            self._reply(
                peer,
                messages.error("server_busy", f"the server already runs {self.max_jobs} jobs; retry later", job=job_id),
            )
            return
        checkpoint_every = message.body.get("checkpoint_every")
        if checkpoint_every is not None and checkpoint_every < 1:
            raise ProtocolError("bad_message", f"checkpoint_every must be at least 1, got {checkpoint_every}")
        resume = message.body.get("resume")
        if resume is not None and (set(resume) != {"checkpoint"} or not isinstance(resume["checkpoint"], dict)):
            raise ProtocolError("bad_message", "resume must be {'checkpoint': {'frame': int, 'groups': {...}}}")
        self._ended.pop(key, None)  # a job id may be reused once its job ended
        job = Job(key, message.body["scene"], self.backend, self._outbox, self._factory,
                  checkpoint_every=checkpoint_every, resume=resume["checkpoint"] if resume else None,
                  store=self.checkpoints, store_every=self.checkpoint_every)
        self._jobs[key] = job
        log.info("job %s submitted by %s", job_id, peer.client)
        job.start()

    def _on_ping(self, peer: Peer, message: Message) -> None:
        """A job-level ping is answered with the job's send state (see messages.pong)."""
        if message.job is None:
            self._reply(peer, messages.pong())
            return
        job = self._known_job(peer, message)
        if job is not None:
            self._reply(peer, messages.pong(job.id, frames_sent=job.sent.last_frame, ended=job.final_sent))

    def _on_resume(self, peer: Peer, message: Message) -> None:
        """Send again the kept frames >= from_frame (ahead of anything queued), then the final
        message if it was already sent. Idempotent: the client drops frames it already has."""
        job = self._known_job(peer, message)
        if job is None:
            return
        try:
            frames = job.sent.since(message.body["from_frame"])
        except ProtocolError as exc:
            if job.key in self._jobs:
                self._end_job(job, messages.error(exc.code, exc.message, job=job.id))
            else:
                self._reply(peer, messages.error(exc.code, exc.message, job=job.id))
            return
        log.info("job %s: resume from frame %d (%d frame(s) sent again)", job.id, message.body["from_frame"], len(frames))
        peer.pending.extendleft(
            Outgoing(job.key, frame_message, frame=frame, job=job, resend=True)
            for frame, frame_message in reversed(frames)
        )
        if job.final_sent:
            peer.pending.append(Outgoing(job.key, job.final_message, final=True, job=job, resend=True))

    def _running_job(self, peer: Peer, message: Message) -> Job | None:
        job = self._jobs.get((peer.identity, message.job))
        if job is None:
            self._reply(
                peer, messages.error("unknown_job", f"no running job {message.job!r} for this client", job=message.job)
            )
        return job

    def _known_job(self, peer: Peer, message: Message) -> Job | None:
        """A running job, or an ended one whose results are still kept."""
        key = (peer.identity, message.job)
        job = self._jobs.get(key) or self._ended.get(key, (None, 0.0))[0]
        if job is None:
            self._reply(
                peer, messages.error("unknown_job", f"no job {message.job!r} known for this client", job=message.job)
            )
        return job

    # -- sending ----------------------------------------------------------------------------------

    def _reply(self, peer: Peer, message: Message) -> None:
        if len(peer.pending) >= MAX_PENDING_REPLIES:
            log.warning("peer %s does not read its replies; dropping a %s", peer.identity.hex(), message.type)
            return
        peer.pending.append(Outgoing((peer.identity, message.job or ""), message))

    def _retire(self, job: Job, final_message: Message) -> None:
        """Move ``job`` from the running table to the ended one (kept RESULT_TTL_S for resume)."""
        job.final_message = final_message
        self._jobs.pop(job.key, None)
        self._ended[job.key] = (job, time.monotonic() + RESULT_TTL_S)
        log.info("job %s ended: %s", job.id, final_message.type)

    def _end_job(self, job: Job, final_message: Message) -> None:
        """End ``job`` now with ``final_message``; its worker's later messages are dropped."""
        job.cancel()
        self._retire(job, final_message)
        peer = self._peers.get(job.key[0])
        if peer is not None:
            peer.pending.append(Outgoing(job.key, final_message, final=True, job=job))

    def _drain_outbox(self) -> None:
        self._outbox.clear_wakeups()
        while True:
            try:
                item = self._outbox.get_nowait()
            except queue.Empty:
                return
            job = self._jobs.get(item.key)
            if job is None:
                continue  # the job was ended by the server (bad drive, vanished peer)
            peer = self._peers.get(item.key[0])
            if peer is None:
                self._jobs.pop(item.key).cancel()
                continue
            item.job = job
            peer.pending.append(item)
            if item.final:
                self._retire(job, item.message)

    def _flush(self) -> None:
        now = time.monotonic()
        for peer in list(self._peers.values()):
            if peer.unreachable_since is not None and now < peer.retry_at:
                continue
            while peer.pending:
                item = peer.pending[0]
                peer.seq += 1
                item.message.seq = peer.seq
                try:
                    frames = encode(item.message)
                except ProtocolError as exc:
                    log.error("cannot encode %s for job %s: %s", item.message.type, item.key[1], exc)
                    peer.pending.popleft()
                    job = self._jobs.get(item.key)
                    if job is not None:
                        self._end_job(job, messages.error("internal", f"cannot encode a result: {exc.message}", job=job.id))
                    continue
                try:
                    self._socket.send_multipart([peer.identity, *frames], zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    peer.seq -= 1
                    break  # the peer's pipe is full: retry on the next tick
                except zmq.ZMQError as exc:
                    if exc.errno != zmq.EHOSTUNREACH:
                        raise
                    peer.seq -= 1
                    if peer.unreachable_since is None:
                        peer.unreachable_since = now
                        log.info("peer %s is unreachable; keeping its jobs for %g s", peer.identity.hex(), self.peer_grace_s)
                    peer.retry_at = now + UNREACHABLE_RETRY_S
                    break
                peer.unreachable_since = None
                peer.pending.popleft()
                job = item.job
                if job is not None and not item.resend:
                    if item.frame is not None:
                        job.note_frame_sent()
                        job.sent.add(item.frame, item.message, sum(memoryview(f).nbytes for f in frames))
                    if item.final:
                        job.final_sent = True

    def _drop_peer(self, peer: Peer, reason: str = "is gone") -> None:
        log.info("peer %s (%s) %s; cancelling its jobs", peer.client, peer.identity.hex(), reason)
        for key in [k for k in self._jobs if k[0] == peer.identity]:
            self._jobs.pop(key).cancel()
        for key in [k for k in self._ended if k[0] == peer.identity]:
            del self._ended[key]
        self._peers.pop(peer.identity, None)

    def _housekeeping(self) -> None:
        """Drop peers unreachable past the grace period, idle peers, and expired results."""
        now = time.monotonic()
        for peer in list(self._peers.values()):
            if peer.unreachable_since is not None and now - peer.unreachable_since > self.peer_grace_s:
                self._drop_peer(peer)
        running = {key[0] for key in self._jobs}
        for identity in running:
            peer = self._peers.get(identity)
            if peer is not None and now - peer.last_seen > self.client_silence_s:
                self._drop_peer(peer, f"has been silent for {now - peer.last_seen:.0f} s")
        busy = {key[0] for key in self._jobs} | {key[0] for key in self._ended}
        for identity, peer in list(self._peers.items()):
            if not peer.pending and identity not in busy and now - peer.last_seen > IDLE_PEER_FORGET_S:
                del self._peers[identity]
        for key in [k for k, (_, expiry) in self._ended.items() if expiry < now]:
            del self._ended[key]

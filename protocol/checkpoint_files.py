"""Solver checkpoints (ARCHITECTURE §3) as bytes and files, without pickle.

A checkpoint is ``{"frame": int, "groups": {group_key: {name: ndarray}}}``. Its byte form is one
uncompressed ``.npz`` (numpy's zip of ``.npy`` arrays, read with ``allow_pickle=False``) holding
``frame``, ``groups/<key>/<name>`` for every array and an empty ``groups/<key>/`` marker per group (so
groups without arrays come back too). The add-on stores the same bytes in the .blend.

:class:`CheckpointDirectory` is the server's crash-recovery store (``--checkpoint-dir``): the newest
checkpoints of each job in ``<root>/<job folder>/frame_<frame>.npz``, written atomically.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

__all__ = ["CheckpointError", "CheckpointDirectory", "encode_checkpoint", "decode_checkpoint"]

_FRAME_KEY = "frame"
_PREFIX = "groups/"
_ALLOWED_KINDS = "fiub"  # float, signed/unsigned int, bool: never objects
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class CheckpointError(ValueError):
    """A checkpoint cannot be stored or read back (bad structure, dtype or corrupted bytes)."""


def encode_checkpoint(checkpoint: Mapping[str, object]) -> bytes:
    """``{"frame": int, "groups": {key: {name: ndarray}}}`` -> npz bytes (bit-exact arrays)."""
    try:
        frame = int(checkpoint["frame"])
        groups = checkpoint["groups"]
        items = [(key, name, value) for key, group in groups.items() for name, value in group.items()]
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"a checkpoint needs an integer 'frame' and 'groups' of arrays ({error})") from None
    arrays = {_FRAME_KEY: np.asarray(frame, dtype="<i8")}
    for key in groups:  # an empty marker per group, so a group without arrays (e.g. "kinematic") survives
        arrays[f"{_PREFIX}{key}/"] = np.zeros(0, dtype="|u1")
    for key, name, value in items:
        array = np.asarray(value)
        if array.dtype.kind not in _ALLOWED_KINDS:
            raise CheckpointError(f"checkpoint array {key}/{name} has dtype {array.dtype}; only numeric and "
                                  "bool arrays can be stored")
        if "/" in str(key) or "/" in str(name):
            raise CheckpointError(f"checkpoint names may not contain '/': {key}/{name}")
        arrays[f"{_PREFIX}{key}/{name}"] = array
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def decode_checkpoint(blob: bytes) -> dict:
    """Inverse of :func:`encode_checkpoint`; arrays come back writable with their dtype and shape."""
    try:
        with np.load(io.BytesIO(bytes(blob)), allow_pickle=False) as archive:
            groups: dict[str, dict[str, np.ndarray]] = {}
            frame = int(archive[_FRAME_KEY])
            for path in archive.files:
                if path.startswith(_PREFIX):
                    key, name = path[len(_PREFIX):].split("/", 1)
                    group = groups.setdefault(key, {})
                    if name:  # "" is the group's marker
                        group[name] = np.array(archive[path])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"checkpoint cannot be read ({type(error).__name__}: {error})") from None
    return {"frame": frame, "groups": groups}


class CheckpointDirectory:
    """The newest ``keep`` checkpoints of every job under ``root`` (created if missing).

    A job's folder is its id when that is a plain name (letters, digits, ``_``, ``-``; client ids
    are uuid4 hex), else ``job-<sha256 of the id>``. Files are ``frame_<NNNNNN>.npz``, written to a
    temporary name and renamed, so a crash never leaves a half-written checkpoint under that name.
    """

    def __init__(self, root: str | os.PathLike, keep: int = 2):
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.root = Path(root)
        self.keep = keep
        self.root.mkdir(parents=True, exist_ok=True)

    def job_folder(self, job_id: str) -> Path:
        name = job_id if _SAFE_NAME.match(job_id) else "job-" + hashlib.sha256(job_id.encode()).hexdigest()
        return self.root / name

    def frames(self, job_id: str) -> list[int]:
        """Frames with a stored checkpoint for ``job_id``, ascending."""
        folder = self.job_folder(job_id)
        if not folder.is_dir():
            return []
        found = (re.fullmatch(r"frame_(-?\d+)\.npz", path.name) for path in folder.iterdir())
        return sorted(int(match.group(1)) for match in found if match)

    def write(self, job_id: str, checkpoint: Mapping[str, object]) -> Path:
        """Store ``checkpoint`` and delete all but the newest ``keep`` of this job; returns the path."""
        folder = self.job_folder(job_id)
        folder.mkdir(exist_ok=True)
        frame = int(checkpoint["frame"])
        path = folder / f"frame_{frame:06d}.npz"
        temporary = folder / f".frame_{frame:06d}.npz.partial"
        with open(temporary, "wb") as handle:
            handle.write(encode_checkpoint(checkpoint))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        for old in self.frames(job_id)[:-self.keep]:
            (folder / f"frame_{old:06d}.npz").unlink(missing_ok=True)
        return path

    def latest(self, job_id: str) -> dict | None:
        """The newest stored checkpoint of ``job_id`` (decoded), or None when there is none."""
        frames = self.frames(job_id)
        if not frames:
            return None
        path = self.job_folder(job_id) / f"frame_{frames[-1]:06d}.npz"
        return decode_checkpoint(path.read_bytes())

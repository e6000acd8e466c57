"""Solver checkpoints as bytes, for storing them inside the .blend. Blender-free.

A checkpoint (ARCHITECTURE §3) is ``{"frame": int, "groups": {group_key: {name: ndarray}}}``: the
whole dynamic state at the end of ``frame``. It is stored as one ``.npz`` blob (numpy's own
container of ``.npy`` arrays; written and read with ``allow_pickle=False``, so a blob can never run
code), which keeps every array bit-exact. Array names inside the blob are ``groups/<key>/<name>``, plus an
empty ``groups/<key>/`` entry per group so that groups without arrays (e.g. the server's "kinematic"
group of a scene with nothing animated) come back too.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterable, Mapping

import numpy as np

_FRAME_KEY = "frame"
_PREFIX = "groups/"
_ALLOWED_KINDS = "fiub"  # float, signed/unsigned int, bool


class CheckpointError(ValueError):
    """A checkpoint cannot be stored or read back (bad structure, dtype or corrupted blob)."""


def encode_checkpoint(checkpoint: Mapping[str, object]) -> bytes:
    """``{"frame": int, "groups": {key: {name: ndarray}}}`` -> bytes (uncompressed npz)."""
    try:
        frame = int(checkpoint["frame"])
        groups = checkpoint["groups"]
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"a checkpoint needs an integer 'frame' and 'groups' ({error})") from None
    arrays = {_FRAME_KEY: np.asarray(frame, dtype="<i8")}
    for key, group in groups.items():
        arrays[f"{_PREFIX}{key}/"] = np.zeros(0, dtype="|u1")  # marks the group, so an empty one survives
        for name, value in group.items():
            array = np.asarray(value)
            if array.dtype.kind not in _ALLOWED_KINDS:
                raise CheckpointError(f"checkpoint array {key}/{name} has dtype {array.dtype}; "
                                      "only numeric and bool arrays can be stored")
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
                    if name:
                        group[name] = np.array(archive[path])
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
        raise CheckpointError(f"stored checkpoint cannot be read ({type(error).__name__}: {error})") from None
    return {"frame": frame, "groups": groups}


def checkpoint_to_resume_from(checkpoint_frames: Iterable[int], frame_start: int, first_new_frame: int) -> int | None:
    """The checkpoint to continue from when frames ``first_new_frame ..`` are to be (re)computed.

    The latest checkpoint frame c with ``frame_start <= c < first_new_frame`` (the state at the end of
    c yields frame c + 1 next), or None when there is none and the simulation must start from the
    scene's input state.
    """
    usable = [frame for frame in checkpoint_frames if frame_start <= frame < first_new_frame]
    return max(usable) if usable else None

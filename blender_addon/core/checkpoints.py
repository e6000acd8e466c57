"""Solver checkpoints as bytes, for storing them inside the .blend. Blender-free.

A checkpoint (ARCHITECTURE §3) is ``{"frame": int, "groups": {group_key: {name: ndarray}}}``: the
whole dynamic state at the end of ``frame``. Its byte form is the protocol package's (one ``.npz``
blob read with ``allow_pickle=False``, so a blob can never run code; arrays stay bit-exact; empty
groups survive), so the add-on and the server's ``--checkpoint-dir`` read each other's blobs.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from .._protocol import PROTOCOL_PACKAGE

_codec = importlib.import_module(f"{PROTOCOL_PACKAGE}.checkpoint_files")
CheckpointError = _codec.CheckpointError
encode_checkpoint = _codec.encode_checkpoint
decode_checkpoint = _codec.decode_checkpoint


def checkpoint_to_resume_from(checkpoint_frames: Iterable[int], frame_start: int, first_new_frame: int) -> int | None:
    """The checkpoint to continue from when frames ``first_new_frame ..`` are to be (re)computed.

    The latest checkpoint frame c with ``frame_start <= c < first_new_frame`` (the state at the end of
    c yields frame c + 1 next), or None when there is none and the simulation must start from the
    scene's input state.
    """
    usable = [frame for frame in checkpoint_frames if frame_start <= frame < first_new_frame]
    return max(usable) if usable else None

"""PC2 point-cache files (the format Blender's Mesh Cache modifier reads). Blender-free.

Layout (little endian): a 32-byte header ``char[12] "POINTCACHE2\\0"``, ``int32 version (1)``,
``int32 point count``, ``float32 start frame``, ``float32 sample rate (frames per sample)``,
``int32 sample count``; then ``sample count × point count × 3`` float32 coordinates.

The bake appends one sample per frame as it arrives (header count updated every time, so a cancelled
or failed bake leaves a valid file with the frames so far); continuing from a frame truncates the file
after the kept samples, leaving their bytes untouched.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

MAGIC = b"POINTCACHE2\0"
VERSION = 1
_HEADER = struct.Struct("<12siiffi")
HEADER_BYTES = _HEADER.size  # 32


class Pc2Error(ValueError):
    """A PC2 file is malformed or does not match the mesh it is written for."""


def _header(point_count: int, start_frame: float, sample_rate: float, sample_count: int) -> bytes:
    return _HEADER.pack(MAGIC, VERSION, point_count, float(start_frame), float(sample_rate), sample_count)


def read_header(path: str | os.PathLike) -> tuple[int, float, float, int]:
    """(point count, start frame, sample rate, sample count) of a PC2 file."""
    with open(path, "rb") as stream:
        raw = stream.read(HEADER_BYTES)
    if len(raw) != HEADER_BYTES:
        raise Pc2Error(f"{path}: too short for a PC2 header ({len(raw)} bytes)")
    magic, version, points, start, rate, samples = _HEADER.unpack(raw)
    if magic != MAGIC or version != VERSION:
        raise Pc2Error(f"{path}: not a PC2 version 1 file")
    return points, start, rate, samples


def read_pc2(path: str | os.PathLike) -> tuple[float, float, np.ndarray]:
    """(start frame, sample rate, positions float32 (S, N, 3)) of a PC2 file."""
    points, start, rate, samples = read_header(path)
    data = np.fromfile(path, dtype="<f4", offset=HEADER_BYTES)
    if data.size != samples * points * 3:
        raise Pc2Error(f"{path}: header says {samples} samples of {points} points, file holds {data.size} floats")
    return start, rate, data.reshape(samples, points, 3)


class Pc2Writer:
    """Appends samples (one per frame) to a PC2 file.

    path: the file. point_count: vertices per sample. start_frame: the frame of sample 0.
    keep_samples: samples of an existing file to keep (the file is truncated after them); 0 starts a
    new file. The existing file must have the same point count and start frame.
    """

    def __init__(self, path: str | os.PathLike, point_count: int, start_frame: int, keep_samples: int = 0):
        self.path = Path(path)
        self.point_count = int(point_count)
        self.start_frame = int(start_frame)
        if keep_samples > 0:
            points, start, _, samples = read_header(self.path)
            if points != self.point_count or start != self.start_frame:
                raise Pc2Error(f"{self.path}: holds {points} points from frame {start:g}, expected "
                               f"{self.point_count} points from frame {self.start_frame}")
            if samples < keep_samples:
                raise Pc2Error(f"{self.path}: holds {samples} frames, {keep_samples} were to be kept")
            with open(self.path, "r+b") as stream:
                stream.truncate(HEADER_BYTES + keep_samples * self.point_count * 12)
                stream.seek(0)
                stream.write(_header(self.point_count, self.start_frame, 1.0, keep_samples))
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "wb") as stream:
                stream.write(_header(self.point_count, self.start_frame, 1.0, 0))
        self.sample_count = int(keep_samples)

    @property
    def next_frame(self) -> int:
        return self.start_frame + self.sample_count

    def append(self, frame: int, positions: np.ndarray) -> None:
        """Add the sample of ``frame`` (must be the next one); positions (N, 3) in the object's local space."""
        if frame != self.next_frame:
            raise Pc2Error(f"{self.path}: frame {frame} arrived, the next sample is frame {self.next_frame}")
        values = np.ascontiguousarray(positions, dtype="<f4")
        if values.shape != (self.point_count, 3):
            raise Pc2Error(f"{self.path}: frame {frame} has positions of shape {values.shape}, "
                           f"expected ({self.point_count}, 3)")
        with open(self.path, "r+b") as stream:
            stream.seek(HEADER_BYTES + self.sample_count * self.point_count * 12)
            stream.write(values.tobytes())
            self.sample_count += 1
            stream.seek(0)
            stream.write(_header(self.point_count, self.start_frame, 1.0, self.sample_count))

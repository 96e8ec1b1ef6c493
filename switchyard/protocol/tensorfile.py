"""The safetensors file format, read and written with numpy alone.

Layer: ``protocol`` — imports nothing of ours; numpy is imported lazily.

A safetensors file is an 8-byte little-endian header length, a JSON header mapping each tensor
name to ``{"dtype", "shape", "data_offsets"}`` (plus an optional ``__metadata__`` of strings), then
the raw little-endian tensor bytes. Probe checkpoints and vLLM's hidden-state dumps use it.
Our own reader keeps serving free of torch and of the ``safetensors`` package, and reads
``BF16`` (which numpy lacks) by widening it to ``float32``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

_MAX_HEADER = 100 * 1024 * 1024

# safetensors dtype -> numpy dtype string (little-endian); BF16 is handled separately.
_DTYPES: dict[str, str] = {
    "F64": "<f8",
    "F32": "<f4",
    "F16": "<f2",
    "I64": "<i8",
    "I32": "<i4",
    "I16": "<i2",
    "I8": "i1",
    "U8": "u1",
    "U16": "<u2",
    "U32": "<u4",
    "U64": "<u8",
    "BOOL": "?",
}
_ITEMSIZE = {"BF16": 2, **{k: int(v[-1]) if v[-1].isdigit() else 1 for k, v in _DTYPES.items()}}


class TensorFileError(ValueError):
    """A file is not a valid safetensors file (the message says what is wrong)."""


def _np() -> Any:
    import numpy

    return numpy


def parse(data: bytes, *, name: str = "<bytes>") -> tuple[dict[str, Any], dict[str, str]]:
    """Decodes a safetensors byte string.

    Args:
        data: The whole file.
        name: Shown in errors.

    Returns:
        ``(tensors, metadata)``: numpy arrays by name (``BF16`` widened to ``float32``; arrays own
        their memory) and the header's ``__metadata__``.

    Raises:
        TensorFileError: Truncated data, a bad header, an unknown dtype or inconsistent offsets.
    """
    np = _np()
    if len(data) < 8:
        raise TensorFileError(f"{name}: too short to be a safetensors file ({len(data)} bytes)")
    (size,) = struct.unpack("<Q", data[:8])
    if size > _MAX_HEADER or 8 + size > len(data):
        raise TensorFileError(f"{name}: header length {size} does not fit the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8 : 8 + size])
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TensorFileError(f"{name}: header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise TensorFileError(f"{name}: header must be a JSON object")
    body = memoryview(data)[8 + size :]
    meta_raw = header.pop("__metadata__", None) or {}
    if not isinstance(meta_raw, dict):
        raise TensorFileError(f"{name}: __metadata__ must be an object of strings")
    metadata = {str(k): str(v) for k, v in meta_raw.items()}
    tensors: dict[str, Any] = {}
    for key, info in header.items():
        if not isinstance(info, dict):
            raise TensorFileError(f"{name}: entry {key!r} is not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in _ITEMSIZE:
            raise TensorFileError(f"{name}: tensor {key!r} has unsupported dtype {dtype!r}")
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise TensorFileError(f"{name}: tensor {key!r} has a bad shape {shape!r}")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise TensorFileError(f"{name}: tensor {key!r} has bad data_offsets {offsets!r}")
        start, end = offsets
        count = 1
        for d in shape:
            count *= d
        if not 0 <= start <= end <= len(body) or end - start != count * _ITEMSIZE[dtype]:
            raise TensorFileError(
                f"{name}: tensor {key!r} ({dtype} {shape}) does not match its data_offsets {offsets} "
                f"(data section is {len(body)} bytes)"
            )
        raw = body[start:end]
        if dtype == "BF16":
            halves = np.frombuffer(raw, dtype="<u2").astype(np.uint32)
            array = (halves << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, dtype=_DTYPES[dtype]).copy()
        tensors[key] = array.reshape(shape)
    return tensors, metadata


def load(path: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """Reads a safetensors file (see :func:`parse`).

    Raises:
        OSError: The file cannot be read.
        TensorFileError: It is not a valid safetensors file.
    """
    p = Path(path)
    return parse(p.read_bytes(), name=str(p))


def _dtype_name(array: Any) -> str:
    np = _np()
    kind = np.dtype(array.dtype).newbyteorder("<").str
    for name, code in _DTYPES.items():
        if np.dtype(code).str == kind or (code == "?" and array.dtype == np.bool_):
            return name
    raise TensorFileError(f"cannot store dtype {array.dtype} in safetensors")


def dumps(
    tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None, *, bf16: frozenset[str] = frozenset()
) -> bytes:
    """Encodes numpy arrays as a safetensors byte string (names sorted, header padded to 8 bytes).

    Args:
        tensors: Arrays by name.
        metadata: String pairs stored as ``__metadata__``.
        bf16: Names of float arrays to store as ``BF16`` (rounded to nearest even), as vLLM does
            for bf16 models.
    """
    np = _np()
    header: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for key in sorted(tensors):
        array = np.ascontiguousarray(tensors[key])
        if key in bf16:
            dtype, raw = "BF16", _bf16_bytes(array)
        else:
            dtype = _dtype_name(array)
            raw = array.astype(np.dtype(_DTYPES[dtype]), copy=False).tobytes()
        header[key] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def _bf16_bytes(array: Any) -> bytes:
    np = _np()
    bits = np.ascontiguousarray(array, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return bytes(rounded.astype("<u2").tobytes())


def save(path: str | Path, tensors: Mapping[str, Any], metadata: Mapping[str, str] | None = None) -> None:
    """Writes ``tensors`` to ``path`` atomically (a temporary file renamed into place)."""
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(dumps(tensors, metadata))
    tmp.replace(p)

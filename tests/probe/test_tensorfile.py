"""The numpy safetensors codec, checked against the official ``safetensors`` library."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from switchyard.protocol import tensorfile  # noqa: E402


def test_round_trip_keeps_dtypes_shapes_and_metadata(tmp_path: Path) -> None:
    tensors = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "ids": np.array([5, -1, 7], dtype=np.int64),
        "half": np.array([0.5, 2.0], dtype=np.float16),
    }
    tensorfile.save(tmp_path / "x.safetensors", tensors, {"k": "v"})
    back, meta = tensorfile.load(tmp_path / "x.safetensors")
    assert meta == {"k": "v"}
    for name, value in tensors.items():
        assert back[name].dtype == value.dtype
        assert np.array_equal(back[name], value)


def test_bf16_is_widened_to_float32_exactly_for_representable_values() -> None:
    values = np.array([[1.0, -2.5, 0.15625], [327680.0, -0.0, 7.0]], dtype=np.float32)
    back, _ = tensorfile.parse(tensorfile.dumps({"h": values}, bf16=frozenset({"h"})))
    assert back["h"].dtype == np.float32
    assert np.array_equal(back["h"], values)


def test_official_library_reads_our_files_and_we_read_its_files(tmp_path: Path) -> None:
    st_numpy = pytest.importorskip("safetensors.numpy")
    ours = {"w": np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32), "i": np.arange(3)}
    tensorfile.save(tmp_path / "ours.safetensors", ours)
    theirs = st_numpy.load_file(str(tmp_path / "ours.safetensors"))
    assert all(np.array_equal(theirs[k], ours[k]) for k in ours)
    st_numpy.save_file(ours, str(tmp_path / "theirs.safetensors"))
    back, _ = tensorfile.load(tmp_path / "theirs.safetensors")
    assert all(np.array_equal(back[k], ours[k]) for k in ours)


def test_bf16_written_by_torch_reads_back(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    x = torch.randn(3, 2, 8, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    st_torch.save_file({"hidden_states": x}, str(tmp_path / "t.safetensors"))
    back, _ = tensorfile.load(tmp_path / "t.safetensors")
    assert np.array_equal(back["hidden_states"], x.float().numpy())
    # and torch reads our BF16 encoding to the same values
    ours = tensorfile.dumps({"h": x.float().numpy()}, bf16=frozenset({"h"}))
    (tmp_path / "o.safetensors").write_bytes(ours)
    assert torch.equal(st_torch.load_file(str(tmp_path / "o.safetensors"))["h"], x)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 999) + b"{}", "does not fit"),
        (struct.pack("<Q", 4) + b"nope", "not JSON"),
        (struct.pack("<Q", 2) + b"[]", "JSON object"),
    ],
)
def test_malformed_headers_are_rejected(data: bytes, needle: str) -> None:
    with pytest.raises(tensorfile.TensorFileError, match=needle):
        tensorfile.parse(data)


def test_offsets_that_do_not_match_the_shape_are_rejected() -> None:
    good = tensorfile.dumps({"a": np.zeros(4, dtype=np.float32)})
    with pytest.raises(tensorfile.TensorFileError, match="data_offsets"):
        tensorfile.parse(good[:-4])
    bad = good.replace(b'"F32"', b'"X99"')
    with pytest.raises(tensorfile.TensorFileError, match="unsupported dtype"):
        tensorfile.parse(bad)

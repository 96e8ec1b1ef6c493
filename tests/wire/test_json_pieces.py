"""dumps_in_pieces: byte-for-byte the same JSON as one orjson call, serialised in slices."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from switchyard.wire.json import dumps_in_pieces


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"messages": []},
        {"messages": list(range(2001))},
        {"model": "m", "messages": [{"role": "user", "content": f"m{i}\x00"} for i in range(4500)], "n": 1},
        # A caller string that looks like a placeholder, before and after the long lists.
        {"a": "\x00slot\x00", "messages": [[i] for i in range(6001)], "tools": [{}] * 2500, "z": "\x00"},
        {"nested": {"messages": list(range(5000))}, "flat": list(range(10))},
    ],
)
def test_same_bytes_as_orjson(obj: dict[str, Any]) -> None:
    assert dumps_in_pieces(obj) == orjson.dumps(obj)

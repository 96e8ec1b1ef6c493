"""Pooling token vectors into one feature vector (numpy).

Layer: ``features``.

Layout, shared by every backend and stored in checkpoints as the recipe: for each selected
layer in order, for each pooling in order, one ``hidden``-wide block — i.e. layer-major
``[layers, poolings, hidden]`` flattened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def pool(states: Any, poolings: Sequence[str], layer_index: Sequence[int] | None = None) -> Any:
    """Pools one prompt's hidden states.

    Args:
        states: ``[tokens, layers, hidden]`` (numpy, any float dtype).
        poolings: ``mean`` (over all tokens), ``last`` (last token), ``first`` (first token).
        layer_index: Positions along axis 1 to keep, in order (default: all).

    Returns:
        ``float32`` vector of length ``len(layers) * len(poolings) * hidden``.
    """
    import numpy as np

    x = np.asarray(states, dtype=np.float32)
    if x.ndim != 3 or x.shape[0] == 0:
        raise ValueError(f"expected [tokens, layers, hidden] with tokens > 0, got shape {list(x.shape)}")
    if layer_index is not None:
        x = x[:, list(layer_index), :]
    blocks = []
    for name in poolings:
        if name == "mean":
            blocks.append(x.mean(axis=0, dtype=np.float64).astype(np.float32))
        elif name == "last":
            blocks.append(x[-1])
        elif name == "first":
            blocks.append(x[0])
        else:
            raise ValueError(f"unknown pooling {name!r}")
    # [poolings, layers, hidden] -> [layers, poolings, hidden]
    return np.stack(blocks, axis=0).transpose(1, 0, 2).reshape(-1).astype(np.float32)

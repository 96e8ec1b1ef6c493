"""An on-disk cache of extracted features, keyed by recipe and text, so re-training is fast.

Layer: ``features``.

Layout: ``ROOT/<recipe key>/recipe.json`` plus ``shard-NNNNN.safetensors`` files, each holding
``keys`` (``U8 [n, 16]``, BLAKE2b-128 of the text) and ``features`` (``F32 [n, D]``). Shards are
written as extraction proceeds, so an interrupted run resumes where it stopped.

A cached *superset* recipe also serves a narrower one (a subset of its layers and poolings, the
same model and settings) by slicing columns, so trying other layer or pooling choices needs no
new extraction.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from switchyard.protocol import tensorfile
from switchyard.protocol.features import FeatureRecipe


def text_key(text: str) -> bytes:
    """The 16-byte digest a text is cached under."""
    return hashlib.blake2b(text.encode("utf-8", errors="surrogatepass"), digest_size=16).digest()


def columns(full: FeatureRecipe, sub: FeatureRecipe) -> list[int] | None:
    """Column indices of ``sub``'s features inside ``full``'s, or ``None`` if ``full`` cannot serve it."""
    if full.hidden_size is None:
        return None
    same = replace(sub, layers=full.layers, pooling=full.pooling, hidden_size=full.hidden_size)
    if same != full or not set(sub.layers) <= set(full.layers) or not set(sub.pooling) <= set(full.pooling):
        return None
    if sub.hidden_size is not None and sub.hidden_size != full.hidden_size:
        return None
    h, n_pool = full.hidden_size, len(full.pooling)
    cols: list[int] = []
    for layer in sub.layers:
        li = full.layers.index(layer)
        for pooling in sub.pooling:
            start = (li * n_pool + full.pooling.index(pooling)) * h
            cols.extend(range(start, start + h))
    return cols


class FeatureCache:
    """Cached features of one recipe under ``root``.

    Args:
        root: Cache root directory (created on first write).
        recipe: The recipe whose features are stored.
    """

    def __init__(self, root: str | Path, recipe: FeatureRecipe) -> None:
        self.recipe = recipe
        self.dir = Path(root) / recipe.key()
        self._rows: dict[bytes, tuple[int, int]] = {}
        self._shards: list[Any] = []
        if self.dir.is_dir():
            for path in sorted(self.dir.glob("shard-*.safetensors")):
                self._add_shard(path)

    def _add_shard(self, path: Path) -> None:
        tensors, _ = tensorfile.load(path)
        index = len(self._shards)
        self._shards.append(tensors["features"])
        for row, key in enumerate(tensors["keys"]):
            self._rows[bytes(key)] = (index, row)

    def __len__(self) -> int:
        return len(self._rows)

    def missing(self, texts: Sequence[str]) -> list[str]:
        """Texts with no cached features (unique, in first-seen order)."""
        seen: dict[bytes, str] = {}
        for t in texts:
            k = text_key(t)
            if k not in self._rows and k not in seen:
                seen[k] = t
        return list(seen.values())

    def add(self, texts: Sequence[str], features: Any) -> None:
        """Stores one batch as a new shard."""
        import numpy as np

        if not texts:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        recipe_file = self.dir / "recipe.json"
        if not recipe_file.exists():
            recipe_file.write_text(json.dumps(self.recipe.to_dict(), indent=2) + "\n", encoding="utf-8")
        keys = np.frombuffer(b"".join(text_key(t) for t in texts), dtype=np.uint8).reshape(len(texts), 16)
        path = self.dir / f"shard-{len(self._shards):05d}.safetensors"
        tensorfile.save(path, {"keys": keys, "features": np.asarray(features, dtype=np.float32)})
        self._add_shard(path)

    def get(self, texts: Sequence[str], cols: Sequence[int] | None = None) -> Any:
        """Features ``[len(texts), D]`` (``KeyError`` naming the first missing text)."""
        import numpy as np

        width = len(cols) if cols is not None else (self._shards[0].shape[1] if self._shards else 0)
        out = np.empty((len(texts), width), dtype=np.float32)
        for i, t in enumerate(texts):
            found = self._rows.get(text_key(t))
            if found is None:
                raise KeyError(f"no cached features for text {t[:60]!r}")
            row = self._shards[found[0]][found[1]]
            out[i] = row if cols is None else row[cols]
        return out

    def fill(
        self,
        texts: Sequence[str],
        extract: Callable[[list[str]], Any],
        *,
        chunk: int = 1024,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Extracts and stores whatever is missing, ``chunk`` texts per shard.

        Returns:
            How many texts were extracted.
        """
        todo = self.missing(texts)
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            self.add(part, extract(part))
            if progress is not None:
                progress(len(part))
        return len(todo)


def find_cache(root: str | Path, recipe: FeatureRecipe) -> tuple[FeatureCache, list[int] | None]:
    """The cache that serves ``recipe``: its own, or a cached superset recipe (with its columns).

    Returns:
        ``(cache, columns)``; ``columns`` is ``None`` for an exact match (including a new, empty
        cache of ``recipe`` itself when nothing fits).
    """
    exact = FeatureCache(root, recipe)
    if len(exact):
        return exact, None
    base = Path(root)
    if base.is_dir():
        for recipe_file in sorted(base.glob("*/recipe.json")):
            try:
                full = FeatureRecipe.from_dict(json.loads(recipe_file.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError):
                continue
            cols = columns(full, recipe)
            if cols is not None:
                cache = FeatureCache(root, full)
                if len(cache):
                    return cache, cols
    return exact, None

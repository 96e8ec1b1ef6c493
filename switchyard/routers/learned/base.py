"""What the learned routers (``prefill_probe``, ``knn``) share: config keys, the decision path,
caching and failing open.

Layer: ``routers`` — imports ``protocol`` only; numpy lazily (through the checkpoint).

Per request: take the text the ``input`` view selects (by default the newest turns of the
conversation; :mod:`switchyard.routers.learned.views`), look its predicted
success probabilities up in the per-task cache, else extract features through the injected
extractor and run the checkpoint; then apply the λ-utility policy. Any failure — the feature
server down or slow, a malformed file, features of the wrong width — sends the request to the
capable target with decision source ``fail_open`` and is not cached.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveInt,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from switchyard.protocol.call import ModelCall
from switchyard.protocol.features import FeatureExtractor, FeaturesConfig
from switchyard.protocol.request import ChatRequest
from switchyard.routers.base import BuildContext, Decision, RouteContext, RouterSpec, Tiers
from switchyard.routers.learned.calibration import Calibration
from switchyard.routers.learned.calibration import load as load_calibration
from switchyard.routers.learned.checkpoint import Checkpoint, CheckpointError, load
from switchyard.routers.learned.control import (
    Observation,
    ThresholdControl,
    ThresholdController,
    threshold_shape,
    warm_start,
)
from switchyard.routers.learned.novelty import NoveltySpec
from switchyard.routers.learned.policy import Choice, TaskCache, UtilityPolicy
from switchyard.routers.learned.sync import SharedControl
from switchyard.routers.learned.views import TextView, view_text

logger = logging.getLogger("switchyard.routers.learned")


class LearnedRouter:
    """Predicts per-target success from features and applies the λ-utility policy.

    Args:
        checkpoint: The validated model.
        heads: Checkpoint output index per target, in route order.
        policy: The decision rule.
        extractor: Makes features (performs the I/O).
        source: Decision source on success (``probe`` or ``knn``).
        view: Which user message is the task text.
        cache_size: Bound of the per-task cache (0: no caching).
        predict_kwargs: Extra arguments for :meth:`Checkpoint.predict` (``k``, ``weighting``).
        abstain_band: See :class:`LearnedSpec`.
        control: The live threshold controller of a ``threshold: {...}`` route.
        prices: ``((input, output), (input, output))`` USD per Mtok of the efficient and the
            capable target (budget mode's cost estimate).
        clock: Wall-clock seconds (the controller's timestamps; tests inject one).
        novelty: What to do beyond the checkpoint's novelty bound (``None``: only record it).
        calibration: The checkpoint's calibration artifact (``None``: raw probabilities).
    """

    def __init__(
        self,
        checkpoint: Checkpoint,
        heads: list[int],
        policy: UtilityPolicy,
        extractor: FeatureExtractor,
        *,
        source: str,
        view: TextView = "conversation",
        turns: int = 6,
        cache_size: int = 4096,
        predict_kwargs: dict[str, Any] | None = None,
        abstain_band: float = 0.0,
        control: SharedControl | None = None,
        prices: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0)),
        clock: Callable[[], float] = time.time,
        novelty: NoveltySpec | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.calibration = calibration
        self._head_names = [checkpoint.output_names[i] for i in heads]
        self.heads = heads
        self.policy = policy
        self.extractor = extractor
        self.source = source
        self.view = view
        self.turns = turns
        self.cache = TaskCache(cache_size)
        self._predict_kwargs = predict_kwargs or {}
        self.abstain_band = abstain_band
        self.control = control
        self._prices = prices  # (input, output) USD per Mtok of (efficient, capable): budget estimates
        self._clock = clock
        self.novelty = novelty
        # prefetch(): text digest -> (probabilities [+ distance], feature_ms, probe_ms), consumed once
        self._prefetched: dict[bytes, tuple[tuple[float, ...], float, float]] = {}

    def probabilities(self, features: Any) -> tuple[float, ...]:
        """Per-target success probabilities (route order) for one feature vector."""
        probs = self.checkpoint.predict(features, **self._predict_kwargs)
        return tuple(float(probs[i]) for i in self.heads)

    def distance(self, features: Any) -> float | None:
        """Novelty of one feature vector against the training rows (``None`` without a reference)."""
        ref = self.checkpoint.novelty
        if ref is None:
            return None
        return float(ref.distance(self.checkpoint.project(features))[0])

    def _novel(self, distance: float | None, details: dict[str, Any]) -> bool:
        """Records the novelty facts; whether the request lies beyond the bound."""
        ref = self.checkpoint.novelty
        if distance is None or ref is None:
            return False
        bound = ref.bound * (self.novelty.bound_scale if self.novelty is not None else 1.0)
        novel = distance > bound
        details["novelty"] = {"distance": round(distance, 6), "bound": round(bound, 6), "novel": novel}
        if novel and self.novelty is not None:
            details["novelty"]["action"] = self.novelty.action
        return novel and self.novelty is not None

    def decide(
        self,
        probs: tuple[float, ...],
        *,
        cached: bool,
        feature_ms: float,
        probe_ms: float,
        threshold: float | None = None,
        distance: float | None = None,
    ) -> Decision:
        """The decision for known probabilities (``threshold``: a controlled route's current one;
        ``distance``: the request's novelty)."""
        cal = self.calibration
        calibrated = probs if cal is None else cal.apply(self._head_names, probs)
        choice = self.policy.choose(probs, threshold=threshold, calibrated=calibrated)
        # p_success: the estimate per target (calibrated when the checkpoint ships a calibration);
        # p_success_raw: the head's own output, which the route's score is computed from.
        p = dict(zip(self.policy.targets, calibrated, strict=True))
        details: dict[str, Any] = {"p_success": p, "cached": cached}
        if cal is not None:
            details["p_success_raw"] = dict(zip(self.policy.targets, probs, strict=True))
            details["calibration"] = cal.tag
        if choice.utilities:
            details["utility"] = choice.utilities
        if not cached:
            details["feature_ms"] = round(feature_ms, 3)
            details["probe_ms"] = round(probe_ms, 3)
        candidates = choice.candidates
        first = candidates[0]
        margin = self.margin(choice, threshold)
        abstained = margin < self.abstain_band
        novel = self._novel(distance, details)
        note = ""
        if novel:
            assert self.novelty is not None
            action = self.novelty.action
            note = f"; novel: distance {distance:.3f} > bound {details['novelty']['bound']:.3f}"
            if action == "abstain":
                abstained, note = True, note + " (abstains)"
            else:
                tier = self.policy.capable if action == "capable" else self.policy.efficient
                candidates = (tier, *(t for t in self.policy.targets if t != tier))
                note += f" (serves {action})"
        if self.abstain_band > 0:
            details["margin"] = round(margin, 6)
        used = self.policy.threshold if threshold is None else threshold
        if threshold is not None:
            details["threshold"] = round(threshold, 6)
        if used is not None:
            mode = f"score {choice.score:.3f} vs threshold {used:.4g}"
        elif self.policy.tolerance is not None:
            mode = f"cheapest within tolerance {self.policy.tolerance:g} of the best P(success)"
        else:
            mode = f"lambda={self.policy.lam}"
        if threshold is not None:
            mode += " (controlled)"
        return Decision(
            candidates=candidates,
            source=self.source,
            score=choice.score,
            confidence=max(p[first], 1.0 - p[first]),
            reason=f"P(success) {first}={p[first]:.2f}; {mode}"
            + (" (cached)" if cached else "")
            + (f"; abstains: margin {margin:.3f} < band {self.abstain_band}" if margin < self.abstain_band else "")
            + note,
            details=details,
            abstained=abstained,
        )

    def margin(self, choice: Choice, threshold: float | None = None) -> float:
        """How far the decision is from flipping: with two targets ``|score - boundary|``
        (``threshold`` — a controlled route's current one — or ``1 / (2λ)`` in λ mode); with
        more, the utility gap between the best two; under ``tolerance``, the distance of the
        nearest other target from the tolerance's cut. A margin below ``abstain_band`` makes the
        router abstain."""
        if choice.margin is not None:
            return choice.margin
        if len(self.policy.targets) == 2:
            return abs(choice.score - (self.policy.boundary() if threshold is None else threshold))
        ranked = sorted(choice.utilities.values(), reverse=True)
        return ranked[0] - ranked[1]

    def fail_open(self, why: str, kind: str) -> Decision:
        """Capable first; nothing cached."""
        return Decision(
            candidates=self.policy.fail_open(),
            source="fail_open",
            reason=why,
            details={"error": kind},
            abstained=True,
        )

    async def route(self, request: ChatRequest, ctx: RouteContext, call: ModelCall) -> Decision:
        text = view_text(request, self.view, self.turns)
        if not text.strip():
            return self.fail_open("no user text to read", "no_text")
        threshold = None if self.control is None else self.control.controller.threshold()
        key = self.cache.key(text)
        hit = self.cache.get(key)
        n = len(self.heads)
        ready = self._prefetched.pop(key, None)
        if hit is None and ready is not None:  # extracted in a batch ahead of time (eval)
            values, feature_ms, probe_ms = ready
            self.cache.put(key, values)
            distance = values[n] if len(values) > n else None
            decision = self.decide(
                values[:n],
                cached=False,
                feature_ms=feature_ms,
                probe_ms=probe_ms,
                threshold=threshold,
                distance=distance,
            )
            return await self._book(decision, request, ctx)
        if hit is not None:  # probabilities, then the novelty distance when the checkpoint has one
            distance = hit[n] if len(hit) > n else None
            decision = self.decide(
                hit[:n], cached=True, feature_ms=0.0, probe_ms=0.0, threshold=threshold, distance=distance
            )
            return await self._book(decision, request, ctx)
        t0 = time.perf_counter()
        try:
            features = await self.extractor.extract([text])
            t1 = time.perf_counter()
            probs = self.probabilities(features[0])
            distance = self.distance(features[0])
        except Exception as exc:  # any failure falls open; the engine must still answer
            kind = getattr(exc, "reason", type(exc).__name__)
            logger.warning("%s router falls open: %s", self.source, exc)
            return self.fail_open(f"{self.source} unavailable: {exc}", str(kind))
        t2 = time.perf_counter()
        self.cache.put(key, probs if distance is None else (*probs, distance))
        decision = self.decide(
            probs,
            cached=False,
            feature_ms=(t1 - t0) * 1000,
            probe_ms=(t2 - t1) * 1000,
            threshold=threshold,
            distance=distance,
        )
        return await self._book(decision, request, ctx)

    def text_of(self, request: ChatRequest) -> str:
        """The text this router reads from ``request`` (its ``input`` view)."""
        return view_text(request, self.view, self.turns)

    async def prefetch(self, texts: Sequence[str], *, batch_size: int = 256) -> int:
        """Extracts and scores ``texts`` in large batches ahead of their decisions.

        Offline evaluation calls it with every item's text so the extractor runs batched (one
        request at a time would extract one text at a time); each later :meth:`route` for one of
        these texts uses the result once, with the batch's time shared out per text as its
        ``feature_ms``/``probe_ms``. A batch that fails is skipped (its texts are extracted when
        decided, and fail open there if the extractor is still down).

        Returns:
            How many texts were prefetched.
        """
        todo: dict[bytes, str] = {}
        for text in texts:
            if text.strip():
                todo.setdefault(self.cache.key(text), text)
        items = list(todo.items())
        done = 0
        for start in range(0, len(items), batch_size):
            chunk = items[start : start + batch_size]
            t0 = time.perf_counter()
            try:
                features = await self.extractor.extract([text for _, text in chunk])
                t1 = time.perf_counter()
                probs = self.checkpoint.predict(features, **self._predict_kwargs)
                ref = self.checkpoint.novelty
                dist = None if ref is None else ref.distance(self.checkpoint.project(features))
            except Exception as exc:  # decided one by one later, failing open there if need be
                logger.warning("%s router: batched extraction failed, deciding one by one: %s", self.source, exc)
                continue
            t2 = time.perf_counter()
            feature_ms, probe_ms = (t1 - t0) * 1000 / len(chunk), (t2 - t1) * 1000 / len(chunk)
            for row, (key, _) in enumerate(chunk):
                values = tuple(float(probs[row][i]) for i in self.heads)
                if dist is not None:
                    values = (*values, float(dist[row]))
                self._prefetched[key] = (values, feature_ms, probe_ms)
            done += len(chunk)
        return done

    async def _book(self, decision: Decision, request: ChatRequest, ctx: RouteContext) -> Decision:
        """Feeds a scored decision to the threshold controller (and, when due, the shared store)."""
        control = self.control
        if control is None or decision.score is None:
            return decision
        now = self._clock()
        cost_eff, cost_cap = self.call_costs(request)
        capable = decision.candidates[0] == self.policy.capable
        control.book(Observation(now, decision.score, capable, cost_eff, cost_cap))
        if ctx.shared is not None and control.due(now):
            await control.sync(ctx.shared, now)  # one store round trip per batch, not per request
        decision.details["control"] = control.state()
        return decision

    def call_costs(self, request: ChatRequest) -> tuple[float, float]:
        """Estimated USD of answering ``request`` on the efficient and on the capable target."""
        assert self.control is not None
        spec = self.control.controller.spec
        if spec.cost_per_call is not None:
            return spec.cost_per_call["efficient"], spec.cost_per_call["capable"]
        tokens_in = sum(len(m.text) for m in request.messages) / 4.0  # ~4 characters a token
        out = float(spec.output_tokens)
        (ei, eo), (ci, co) = self._prices
        return (tokens_in * ei + out * eo) / 1e6, (tokens_in * ci + out * co) / 1e6

    def control_state(self) -> dict[str, Any] | None:
        """The threshold controller's state (``None`` for a fixed threshold)."""
        return None if self.control is None else self.control.state()

    async def aclose(self) -> None:
        """Closes the extractor's connections."""
        await self.extractor.aclose()


class LearnedSpec(RouterSpec):
    """Keys shared by ``prefill_probe`` and ``knn`` routes.

    Attributes:
        targets: Candidate targets (at least two), in route order.
        checkpoint: Directory with ``router.json`` (relative to the config file).
        features: How features are made (``backend: vllm_hidden_states | transformers |
            embeddings``); must match the checkpoint's recipe.
        lambda_: λ of the utility ``λ·P(success) - (1-λ)·normcost`` (YAML key ``lambda``;
            default 0.75).
        threshold: Two targets only: capable iff score >= threshold; overrides ``lambda``.
            A number is fixed (``switchyard calibrate`` writes it); a block —
            ``{target_capable_share: 0.3}`` or ``{budget_usd_per_hour: 5.0}`` — is adjusted
            online from the stream of scores (:class:`~switchyard.routers.learned.control.ThresholdControl`).
        costs: Relative cost per target (default: input + output price per Mtok).
        capable: Target used when the router fails (default: the costliest).
        heads: Checkpoint output name per target (default: the target's own name).
        input: ``conversation`` (default: the newest ``turns`` messages after a digest of the
            system prompt; a single user message reads as itself), ``first_user`` (the task:
            one decision per session) or ``last_user``.
        turns: Messages the ``conversation`` view keeps.
        cache_size: Per-task decision cache bound (0 disables).
        abstain_band: Abstain (inside a ``cascade``: let the next stage decide) when the
            decision is within this distance of flipping — ``|score - threshold|`` for two
            targets (``1/(2λ)`` stands in for the threshold in λ mode), the utility gap of the
            best two targets otherwise. 0 (the default) never abstains.
        novelty: Beyond the checkpoint's novelty bound (a request far from every training
            row): ``{action: abstain}`` (a cascade's next stage decides), ``{action: capable}``
            or ``{action: efficient}``; unset: the distance is only recorded.
        tolerance: The cost-aware rule: serve the cheapest target whose (calibrated)
            P(success) is within this of the best target's; replaces ``lambda``, not together
            with ``threshold``.
        calibration: Read the checkpoint's ``calibration.json`` when it has one (default);
            ``false`` serves the head's raw probabilities.
    """

    targets: list[str] = Field(min_length=2)
    checkpoint: str
    features: FeaturesConfig
    lambda_: float | None = Field(default=None, alias="lambda", ge=0.0, le=1.0)
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] | ThresholdControl | None = Field(
        default=None, union_mode="left_to_right"
    )
    costs: dict[str, NonNegativeFloat] | None = None
    capable: str | None = None
    heads: dict[str, str] = Field(default_factory=dict)
    input: TextView = "conversation"
    turns: PositiveInt = 6
    cache_size: NonNegativeInt = 4096
    abstain_band: float = Field(default=0.0, ge=0.0, le=0.5)
    novelty: NoveltySpec | None = None
    tolerance: float | None = Field(default=None, ge=0.0, le=1.0)
    calibration: bool = True

    @field_validator("targets")
    @classmethod
    def _unique(cls, targets: list[str]) -> list[str]:
        if len(set(targets)) != len(targets):
            raise ValueError("targets must be unique")
        return targets

    @field_validator("threshold", mode="wrap")
    @classmethod
    def _threshold_shape(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        return threshold_shape(
            value,
            handler,
            "a number in [0, 1] or a block such as {target_capable_share: 0.3} or {budget_usd_per_hour: 5.0}",
        )

    @model_validator(mode="after")
    def _consistent(self) -> LearnedSpec:
        if self.threshold is not None and len(self.targets) != 2:
            raise ValueError("'threshold' needs exactly two targets; use 'lambda' for more")
        if self.tolerance is not None and self.threshold is not None:
            raise ValueError("'tolerance' and 'threshold' are two different rules; set one of them")
        for key, names in (("costs", self.costs or {}), ("heads", self.heads)):
            unknown = sorted(set(names) - set(self.targets))
            if unknown:
                raise ValueError(f"{key} names {unknown}, which are not in targets")
        if self.costs is not None and set(self.costs) != set(self.targets):
            raise ValueError(
                f"costs must give every target a cost; missing {sorted(set(self.targets) - set(self.costs))}"
            )
        if self.capable is not None and self.capable not in self.targets:
            raise ValueError(f"capable {self.capable!r} is not one of targets")
        return self

    def target_refs(self) -> list[tuple[str, str]]:
        return [(f"targets[{i}]", t) for i, t in enumerate(self.targets)]

    def _capable_and_efficient(self) -> tuple[str, str] | None:
        if len(self.targets) != 2:
            return None
        if self.capable is not None:
            other = next(t for t in self.targets if t != self.capable)
            return self.capable, other
        if self.costs is not None:
            a, b = self.targets
            return (a, b) if self.costs[a] >= self.costs[b] else (b, a)
        return None

    def tiers(self) -> Tiers | None:
        """Capable and efficient targets of a two-target route (from ``capable`` or ``costs``)."""
        pair = self._capable_and_efficient()
        return None if pair is None else Tiers(capable=pair[0], efficient=pair[1])

    def threshold_key(self) -> str | None:
        """``threshold`` for two-target routes (capable iff ``Decision.score >= threshold``);
        ``None`` for a controlled threshold, which ``calibrate`` must not overwrite with a number,
        and under ``tolerance``, which a threshold would contradict."""
        if isinstance(self.threshold, ThresholdControl) or self.tolerance is not None:
            return None
        return "threshold" if len(self.targets) == 2 else None

    def controlled(self) -> bool:
        """Whether the threshold is adjusted online (its replay needs the dataset in order)."""
        return isinstance(self.threshold, ThresholdControl)

    def _costs(self, ctx: BuildContext) -> list[float]:
        if self.costs is not None:
            return [float(self.costs[t]) for t in self.targets]
        out = []
        for t in self.targets:
            info = ctx.targets.get(t)
            out.append(0.0 if info is None else info.price.input_per_mtok + info.price.output_per_mtok)
        return out

    def build_learned(self, ctx: BuildContext, kind: str, source: str, **predict: Any) -> LearnedRouter:
        """Loads and checks the checkpoint, builds the extractor, wires the policy.

        Raises:
            ValueError: (``CheckpointError`` included) anything that does not fit, with a message
                naming the key.
        """
        path = Path(self.checkpoint)
        if not path.is_absolute() and ctx.config_dir:
            path = Path(ctx.config_dir) / path
        cp = load(path, kind=kind)
        heads = []
        for t in self.targets:
            name = self.heads.get(t, t)
            if name not in cp.output_names:
                raise CheckpointError(
                    f"checkpoint {path} has no head {name!r} for target {t!r}; its heads are {cp.output_names} "
                    "(map them with 'heads: {TARGET: HEAD}')"
                )
            heads.append(cp.output_names.index(name))
        if ctx.features is None:
            raise ValueError("this route extracts features; build it through switchyard.config")
        if self.novelty is not None and cp.novelty is None:
            raise CheckpointError(
                f"novelty: checkpoint {path} has no novelty reference (trained before it existed); "
                "retrain it with `switchyard train-probe` or remove 'novelty'"
            )
        extractor = ctx.features(self.features, ctx.config_dir)
        problems = cp.recipe.mismatches(extractor.recipe)
        if problems:
            raise ValueError("features do not match the checkpoint's recipe: " + "; ".join(problems))
        costs = self._costs(ctx)
        control = None
        threshold = self.threshold
        if isinstance(threshold, ThresholdControl):
            start = warm_start(threshold, cp.meta.get("training", {}).get("operating_points"))
            control = SharedControl(ThresholdController(threshold, start))
            threshold = start
        policy = UtilityPolicy(
            self.targets,
            costs,
            lam=0.75 if self.lambda_ is None else self.lambda_,
            threshold=threshold,
            capable=self.capable,
            tolerance=self.tolerance,
        )
        calibration = load_calibration(path, cp.output_names) if self.calibration else None
        prices = []
        for name in (policy.efficient, policy.capable):
            info = ctx.targets.get(name)
            prices.append((0.0, 0.0) if info is None else (info.price.input_per_mtok, info.price.output_per_mtok))
        return LearnedRouter(
            cp,
            heads,
            policy,
            extractor,
            source=source,
            view=self.input,
            turns=self.turns,
            cache_size=self.cache_size,
            predict_kwargs=predict,
            abstain_band=self.abstain_band,
            control=control,
            prices=(prices[0], prices[1]),
            novelty=self.novelty,
            calibration=calibration,
        )

"""Training learned routers: standardise → PCA → a small MLP ensemble (torch), or a kNN index.

Layer: ``probe`` — numpy always; torch only inside :func:`train_probe`.

Deterministic for a given seed: PCA is an exact eigendecomposition (or a seeded randomised
SVD for very wide features), each ensemble member has its own seeded initialisation and batch
order, torch runs with deterministic algorithms, and early stopping reads a validation split
carved from the *training* rows by a seeded shuffle (test rows never enter training or tuning).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import field
from typing import Any

from switchyard._dataclass import dataclass
from switchyard.protocol.features import FeatureRecipe
from switchyard.routers.learned.checkpoint import Checkpoint, Member, Transform

_EXACT_PCA_MAX_DIM = 8192


@dataclass(slots=True)
class ProbeParams:
    """Probe hyper-parameters (the CLI flags of ``switchyard train-probe``).

    Attributes:
        pca_dim: Principal components kept.
        hidden: Widths of the ReLU hidden layers.
        ensemble: Members (each its own seed).
        epochs: Upper bound on passes over the data.
        patience: Epochs without validation improvement before a member stops.
        lr: Adam learning rate.
        weight_decay: AdamW weight decay.
        dropout: Dropout after each hidden layer (training only).
        batch_size: Rows per step.
        val_fraction: Share of the training rows held out for early stopping.
        seed: Seed of everything.
        device: torch device (``cpu``, ``cuda``).
    """

    pca_dim: int = 128
    hidden: tuple[int, ...] = (256, 128)
    ensemble: int = 5
    epochs: int = 60
    patience: int = 8
    lr: float = 1e-3
    weight_decay: float = 1e-2
    dropout: float = 0.2
    batch_size: int = 256
    val_fraction: float = 0.15
    seed: int = 0
    device: str = "cpu"


@dataclass(slots=True)
class TrainResult:
    """A trained checkpoint plus what is needed to check it.

    Attributes:
        checkpoint: The numpy model.
        modules: The torch members (probe only), for parity checks.
        history: Per member: best validation loss and the epoch it was reached.
        train_rows: Row indices used for fitting.
        val_rows: Row indices used for early stopping / tuning.
    """

    checkpoint: Checkpoint
    modules: list[Any] = field(default_factory=list)
    history: list[dict[str, float]] = field(default_factory=list)
    train_rows: Any = None
    val_rows: Any = None


def split_rows(n: int, val_fraction: float, seed: int, strata: Sequence[str] | None = None) -> tuple[Any, Any]:
    """A seeded train/validation split of ``range(n)``, stratified by ``strata`` when given."""
    import numpy as np

    rng = np.random.default_rng(seed)
    groups: dict[str, list[int]] = {}
    for i in range(n):
        groups.setdefault(strata[i] if strata is not None else "", []).append(i)
    train: list[int] = []
    val: list[int] = []
    for key in sorted(groups):
        idx = np.array(groups[key])
        rng.shuffle(idx)
        cut = round(len(idx) * val_fraction) if len(idx) > 1 else 0
        val.extend(idx[:cut].tolist())
        train.extend(idx[cut:].tolist())
    return np.array(sorted(train), dtype=np.int64), np.array(sorted(val), dtype=np.int64)


def fit_transform(x: Any, pca_dim: int, seed: int = 0, *, whiten: bool = False) -> Transform:
    """Fits standardisation and PCA on ``x`` ``[n, D]``.

    Components are sign-fixed (largest absolute loading positive) so results do not depend on the
    solver's sign convention. ``whiten`` divides each component by its standard deviation on
    ``x`` (sample SD, as scikit-learn's ``PCA(whiten=True)``), so every output has unit variance.
    """
    import numpy as np

    x64 = np.asarray(x, dtype=np.float64)
    mean = x64.mean(axis=0)
    scale = x64.std(axis=0)
    scale = np.where(scale < 1e-6, 1.0, scale)
    z = (x64 - mean) / scale
    pca_mean = z.mean(axis=0)
    z -= pca_mean
    k = int(min(pca_dim, z.shape[0], z.shape[1]))
    if z.shape[1] <= _EXACT_PCA_MAX_DIM:
        cov = (z.T @ z) / max(1, z.shape[0] - 1)
        _, vectors = np.linalg.eigh(cov)
        comps = vectors[:, ::-1][:, :k].T
    else:
        comps = _randomized_components(z, k, seed)
    signs = np.sign(comps[np.arange(k), np.abs(comps).argmax(axis=1)])
    comps = comps * np.where(signs == 0, 1.0, signs)[:, None]
    if whiten:
        sd = (z @ comps.T).std(axis=0, ddof=1) if z.shape[0] > 1 else np.ones(k)
        comps = comps / np.maximum(sd, 1e-6)[:, None]
    return Transform(
        mean.astype(np.float32), scale.astype(np.float32), pca_mean.astype(np.float32), comps.astype(np.float32)
    )


def _randomized_components(z: Any, k: int, seed: int) -> Any:
    import numpy as np

    rng = np.random.default_rng(seed)
    q = z @ rng.standard_normal((z.shape[1], k + 10))
    for _ in range(4):
        q, _ = np.linalg.qr(z @ (z.T @ q))
    _, _, vt = np.linalg.svd(q.T @ z, full_matrices=False)
    return vt[:k]


def _masked_bce(torch: Any, logits: Any, y: Any, mask: Any) -> Any:
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y, reduction="none")
    return (loss * mask).sum() / mask.sum().clamp(min=1.0)


def _mlp(torch: Any, d_in: int, hidden: Sequence[int], n_out: int, dropout: float) -> Any:
    layers: list[Any] = []
    width = d_in
    for h in hidden:
        layers += [torch.nn.Linear(width, h), torch.nn.ReLU(), torch.nn.Dropout(dropout)]
        width = h
    layers.append(torch.nn.Linear(width, n_out))
    return torch.nn.Sequential(*layers)


def train_probe(
    x: Any,
    y: Any,
    names: Sequence[str],
    recipe: FeatureRecipe,
    params: ProbeParams,
    *,
    strata: Sequence[str] | None = None,
    progress: Callable[[int], None] | None = None,
) -> TrainResult:
    """Fits the transform and the MLP ensemble.

    Args:
        x: Features ``[n, D]``.
        y: Success labels ``[n, N]`` in ``{0, 1}``, ``NaN`` where unknown.
        names: Output (head) names, one per column of ``y``.
        recipe: How ``x`` was made (stored in the checkpoint).
        params: Hyper-parameters.
        strata: Per-row group for a stratified validation split (e.g. the benchmark).
        progress: Called with 1 after each epoch of each member.
    """
    import numpy as np
    import torch

    x = np.asarray(x, dtype=np.float32)
    y = np.asarray(y, dtype=np.float32)
    train_rows, val_rows = split_rows(len(x), params.val_fraction, params.seed, strata)
    transform = fit_transform(x[train_rows], params.pca_dim, params.seed)
    z = transform.apply(x).astype(np.float32)
    mask = (~np.isnan(y)).astype(np.float32)
    labels = np.nan_to_num(y, nan=0.0)
    device = torch.device(params.device)
    torch.use_deterministic_algorithms(True, warn_only=True)
    zt, yt, mt = (torch.from_numpy(a).to(device) for a in (z, labels, mask))
    members: list[Member] = []
    modules: list[Any] = []
    history: list[dict[str, float]] = []
    tr = torch.from_numpy(train_rows).to(device)
    va = torch.from_numpy(val_rows).to(device) if len(val_rows) else tr
    for e in range(params.ensemble):
        seed = params.seed * 1000 + e
        torch.manual_seed(seed)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        net = _mlp(torch, z.shape[1], params.hidden, y.shape[1], params.dropout).to(device)
        opt = torch.optim.AdamW(net.parameters(), lr=params.lr, weight_decay=params.weight_decay)
        best, best_epoch, best_state, waited = float("inf"), 0, None, 0
        for epoch in range(params.epochs):
            net.train()
            order = tr[torch.randperm(len(tr), generator=gen).to(device)]
            for start in range(0, len(order), params.batch_size):
                idx = order[start : start + params.batch_size]
                opt.zero_grad()
                loss = _masked_bce(torch, net(zt[idx]), yt[idx], mt[idx])
                loss.backward()
                opt.step()
            net.eval()
            with torch.no_grad():
                val_loss = float(_masked_bce(torch, net(zt[va]), yt[va], mt[va]))
            if progress is not None:
                progress(1)
            if val_loss < best - 1e-5:
                best, best_epoch, waited = val_loss, epoch + 1, 0
                best_state = {k: v.detach().clone() for k, v in net.state_dict().items()}
            else:
                waited += 1
                if waited >= params.patience:
                    if progress is not None:
                        progress(params.epochs - epoch - 1)
                    break
        assert best_state is not None
        net.load_state_dict(best_state)
        net.eval()
        net.cpu()
        modules.append(net)
        members.append(_to_member(net))
        history.append({"val_loss": best, "epoch": float(best_epoch)})
    cp = Checkpoint(kind="prefill_probe", output_names=list(names), recipe=recipe, transform=transform, members=members)
    return TrainResult(cp, modules, history, train_rows, val_rows)


def _to_member(net: Any) -> Member:
    import numpy as np

    linears = [m for m in net if hasattr(m, "weight")]
    as_np = [
        (lin.weight.detach().numpy().astype(np.float32), lin.bias.detach().numpy().astype(np.float32))
        for lin in linears
    ]
    return Member(hidden=as_np[:-1], output=as_np[-1])


def torch_predict(result: TrainResult, x: Any) -> Any:
    """Probabilities computed by the torch members (float64), for parity with numpy inference."""
    import numpy as np
    import torch

    t = result.checkpoint.transform
    x64 = np.asarray(x, dtype=np.float64)
    z = ((x64 - t.scaler_mean) / t.scaler_scale - t.pca_mean) @ t.pca_components.astype(np.float64).T
    zt = torch.from_numpy(z)
    with torch.no_grad():
        probs = [torch.sigmoid(net.double()(zt)).numpy() for net in result.modules]
        for net in result.modules:
            net.float()
    return np.mean(probs, axis=0)


def build_knn(
    x: Any,
    y: Any,
    names: Sequence[str],
    recipe: FeatureRecipe,
    *,
    pca_dim: int,
    k: int,
    weighting: str = "distance",
    metric: str = "cosine",
    seed: int = 0,
) -> Checkpoint:
    """A kNN checkpoint over ``x`` (labels ``y``; unknown labels count as failures)."""
    import numpy as np

    transform = fit_transform(x, pca_dim, seed)
    points = transform.apply(np.asarray(x, dtype=np.float32)).astype(np.float32)
    labels = np.nan_to_num(np.asarray(y, dtype=np.float32), nan=0.0)
    if metric == "cosine":
        points_n = points / np.maximum(np.linalg.norm(points, axis=1, keepdims=True), 1e-12)
    else:
        points_n = points
    return Checkpoint(
        kind="knn",
        output_names=list(names),
        recipe=recipe,
        transform=transform,
        points=points_n.astype(np.float32),
        labels=labels,
        k=k,
        weighting=weighting,
        metric=metric,
    )

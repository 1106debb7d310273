"""L(N, D) = E + A·N^(−α) + B·D^(−β), Hoffmann et al. 2022's parametric loss (arXiv 2203.15556,
§3.3, their Approach 3), fitted by least squares, and the compute-optimal size it implies.

Pure numpy, batched like `gptlab.analysis.ladder.powerlaw`: one call fits the point estimate and
every bootstrap resample. **The fit** is variable projection over the two exponents: for fixed
(α, β) the model is linear in (E, A, B), and the design matrix [1, N^(−α), D^(−β)] does not depend
on the losses, so one pseudo-inverse per (α, β) fits every data set of the batch at once. A
log-spaced scan of (α, β) over [ALPHA_MIN, ALPHA_MAX]² finds each data set's best cell, then a
zooming 5 × 5 pattern search refines it. N and D are taken relative to their geometric means (the
regressors are O(1)). An exponent whose scan optimum lies on the scan's edge is *not converged*:
the data ask for no power law in that variable, and no number is reported for it.

Hoffmann et al. fit log-loss with a Huber loss (δ = 10⁻³) from a grid of L-BFGS starts; plain
least squares on the loss is used here (the losses are few and clean, and it is the ladder's
criterion), which the report says.

**The compute-optimal size.** Minimising E + A·N^(−α) + B·D^(−β) at fixed C = 6·N·D gives
N_opt(C) = G·(C/6)^a and D_opt(C) = G^(−1)·(C/6)^b, with G = (αA/(βB))^(1/(α+β)), a = β/(α+β),
b = α/(α+β) (Hoffmann et al., eq. 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

ALPHA_MIN, ALPHA_MAX = 1e-2, 3.0  # the exponents' search range; a scan optimum on its edge: not converged
SCAN = 40  # log-spaced values per exponent (ratio 1.16 between neighbours)
ZOOM_STEPS = 30  # pattern-search rounds; the step halves each round
PATTERN = np.linspace(-1.0, 1.0, 5)
PARAMS = 5  # E, A, α, B, β


@dataclass(frozen=True)
class SurfaceFit:
    """Batched fits: arrays of the batch's shape (A in N's units, B in D's)."""

    E: np.ndarray
    A: np.ndarray
    alpha: np.ndarray
    B: np.ndarray
    beta: np.ndarray
    sse: np.ndarray
    n_ref: float
    d_ref: float
    alpha_converged: np.ndarray  # α's scan optimum strictly inside the scan
    beta_converged: np.ndarray

    def predict(self, n: float | np.ndarray, d: float | np.ndarray) -> np.ndarray:
        """L at (n, d), broadcast against the batch (n and d of shape (..., *batch) or scalars)."""
        return (
            self.E
            + self.A * np.asarray(n, float) ** (-self.alpha)
            + self.B * np.asarray(d, float) ** (-self.beta)
        )

    @property
    def converged(self) -> np.ndarray:
        return self.alpha_converged & self.beta_converged

    def exponent_a(self) -> np.ndarray:
        """a in N_opt ∝ C^a: β/(α+β)."""
        return self.beta / (self.alpha + self.beta)

    def optimal_n(self, flops: float) -> np.ndarray:
        """N_opt at C = `flops` (C = 6·N·D): G·(C/6)^a, G = (αA/(βB))^(1/(α+β)); NaN where A or B
        is not positive (no interior optimum)."""
        s = self.alpha + self.beta
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = (self.alpha * self.A) / (self.beta * self.B)
            g = np.where(ratio > 0, np.abs(ratio) ** (1.0 / s), np.nan)
            return g * (flops / 6.0) ** (self.beta / s)


def _design(logn: np.ndarray, logd: np.ndarray, alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """(..., P, 3) design [1, (N/N_ref)^(−α), (D/D_ref)^(−β)] for exponents of shape (...)."""
    x1 = np.exp(-alpha[..., None] * logn)
    x2 = np.exp(-beta[..., None] * logd)
    return np.stack([np.ones_like(x1), x1, x2], axis=-1)


def _solve(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares (E, A', B') and SSE for a design (..., P, 3) and losses y (..., P)."""
    dt = np.swapaxes(design, -1, -2)
    gram, rhs = dt @ design, dt @ y[..., None]
    try:
        coef = np.linalg.solve(gram, rhs)[..., 0]
    except np.linalg.LinAlgError:  # a degenerate design (collinear columns): the minimum-norm fit
        coef = (np.linalg.pinv(design) @ y[..., None])[..., 0]
    resid = y - (design @ coef[..., None])[..., 0]
    return coef, (resid * resid).sum(-1)


def fit_surface(n: np.ndarray, d: np.ndarray, y: np.ndarray) -> SurfaceFit:
    """Least squares of y = E + A·n^(−α) + B·d^(−β) along y's last axis (points), any batch shape
    in front; `n`, `d`: the points' sizes and tokens, shape (P,)."""
    y = np.asarray(y, dtype=float)
    n, d = np.asarray(n, dtype=float), np.asarray(d, dtype=float)
    if np.any(n <= 0) or np.any(d <= 0):
        raise ValueError("surface fit: every size and token count must be > 0")
    n_ref, d_ref = float(np.exp(np.log(n).mean())), float(np.exp(np.log(d).mean()))
    logn, logd = np.log(n / n_ref), np.log(d / d_ref)
    batch = y.shape[:-1]
    flat = y.reshape(-1, y.shape[-1])  # (M, P)
    grid = np.linspace(math.log(ALPHA_MIN), math.log(ALPHA_MAX), SCAN)
    ga, gb = np.meshgrid(grid, grid, indexing="ij")  # (SCAN, SCAN) log-exponents
    # SSE = |y|² − |Qᵀy|², Q an orthonormal basis of each scan cell's design: one matrix product
    q, _ = np.linalg.qr(_design(logn, logd, np.exp(ga), np.exp(gb)).reshape(-1, len(n), 3))  # (C, P, 3)
    proj = flat @ np.transpose(q, (1, 0, 2)).reshape(len(n), -1)  # (M, C·3)
    sse = (flat * flat).sum(-1)[:, None] - (proj.reshape(len(flat), -1, 3) ** 2).sum(-1)  # (M, C)
    best = sse.argmin(-1)
    ia, ib = np.unravel_index(best, (SCAN, SCAN))
    la, lb = grid[ia], grid[ib]
    step = grid[1] - grid[0]
    lo, hi = grid[0], grid[-1]
    cur = sse[np.arange(len(flat)), best]
    for _ in range(ZOOM_STEPS):  # 5 × 5 pattern around each data set's best, then halve the step
        ca = np.clip(la[:, None, None] + step * PATTERN[None, :, None], lo, hi)
        cb = np.clip(lb[:, None, None] + step * PATTERN[None, None, :], lo, hi)
        ca, cb = np.broadcast_arrays(ca, cb)
        _, s = _solve(_design(logn, logd, np.exp(ca), np.exp(cb)), flat[:, None, None, :])
        k = s.reshape(len(flat), -1).argmin(-1)
        take = np.arange(len(flat))
        better = s.reshape(len(flat), -1)[take, k] < cur
        la = np.where(better, ca.reshape(len(flat), -1)[take, k], la)
        lb = np.where(better, cb.reshape(len(flat), -1)[take, k], lb)
        cur = np.minimum(cur, s.reshape(len(flat), -1)[take, k])
        step /= 2
    alpha, beta = np.exp(la), np.exp(lb)
    coef, sse_final = _solve(_design(logn, logd, alpha, beta), flat)
    e, a_ref, b_ref = coef[..., 0], coef[..., 1], coef[..., 2]

    def shaped(v: np.ndarray) -> np.ndarray:
        return v.reshape(batch)

    return SurfaceFit(
        E=shaped(e), A=shaped(a_ref * n_ref**alpha), alpha=shaped(alpha),
        B=shaped(b_ref * d_ref**beta), beta=shaped(beta), sse=shaped(sse_final), n_ref=n_ref, d_ref=d_ref,
        alpha_converged=shaped((ia > 0) & (ia < SCAN - 1)), beta_converged=shaped((ib > 0) & (ib < SCAN - 1)),
    )  # fmt: skip


def residual_resamples(
    n: np.ndarray, d: np.ndarray, y: np.ndarray, point: SurfaceFit, draws: int, rng_seed: int = 0
) -> np.ndarray:
    """(draws, P) losses for a bootstrap over residuals (one seed: nothing else to resample): the
    point fit's values plus its residuals drawn with replacement, each scaled by sqrt(P/(P − 5))
    (least-squares residuals are smaller than the errors by about that much)."""
    fitted = point.predict(n, d)
    resid = y - fitted
    p = len(y)
    scale = math.sqrt(p / (p - PARAMS)) if p > PARAMS else 1.0
    idx = np.random.default_rng(rng_seed).integers(0, p, size=(draws, p))
    return fitted[None, :] + scale * resid[idx]

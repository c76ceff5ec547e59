"""TRON: trust-region Newton with Steihaug's truncated conjugate gradient (the thesis's
Algorithms 1–2, after Lin & Moré 1999), over flat NumPy vectors, needing only ``f``, ``∇f`` and
Hessian-vector products.

Constants and radius rules are LIBLINEAR's ``tron.cpp`` (the thesis gives none; digest §3.2):
η0 = 1e-4 (accept when the actual reduction exceeds η0 × predicted), η1 = 0.25, η2 = 0.75,
σ1 = 0.25, σ2 = 0.5, σ3 = 4; Δ0 = ‖∇f(x0)‖ (cut to the first step's length); CG stops at
‖r‖ ≤ 0.1‖∇f‖ or on the trust-region boundary; TRON stops at ‖∇f‖ ≤ ε‖∇f(x0)‖. The CG residual
update ``r ← r − α H d`` that the thesis's Algorithm 2 drops is restored (digest §3.6). The new
radius interpolates the step length ``α‖s‖`` where the one-dimensional quadratic through f(x),
∇f(x)ᵀs and f(x + s) has its minimum, clipped to the interval of the rule ρ selects.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger(__name__)

Vector = np.ndarray  # (d,) float64


@dataclass(frozen=True)
class Settings:
    eta0: float = 1e-4
    eta1: float = 0.25
    eta2: float = 0.75
    sigma1: float = 0.25
    sigma2: float = 0.5
    sigma3: float = 4.0
    cg_tolerance: float = 0.1  # ξ: CG stops at ‖r‖ ≤ ξ‖∇f‖
    epsilon: float = 1e-6  # stop at ‖∇f‖ ≤ ε‖∇f(x0)‖
    max_iterations: int = 500  # outer iterations (accepted or not)
    max_cg_steps: int = 1000  # per subproblem


@dataclass(frozen=True)
class Iteration:
    """One outer iteration: the objective and gradient norm after it, the radius for the next one,
    the CG steps it took, whether its step was accepted, and ρ = actual / predicted reduction."""

    iteration: int
    objective: float
    gradient_norm: float
    radius: float
    cg_steps: int
    accepted: bool
    ratio: float


@dataclass(frozen=True)
class Result:
    x: Vector
    objective: float
    gradient_norm: float
    converged: bool  # ‖∇f‖ ≤ ε‖∇f(x0)‖ was reached
    history: list[Iteration] = field(default_factory=list)


def steihaug_cg(
    gradient: Vector, hvp: Callable[[Vector], Vector], radius: float, tolerance: float, max_steps: int
) -> tuple[Vector, Vector, int, bool]:
    """Approximately minimise ``gᵀs + ½ sᵀHs`` over ``‖s‖ ≤ radius`` by conjugate gradient from 0.

    Returns the step s, the residual r = −g − Hs, the number of Hv products, and whether the step
    ended on the boundary. H is positive definite here (an L2-regularised convex objective), so
    no negative-curvature exit is needed; a non-positive ``dᵀHd`` raises.
    """
    step = np.zeros_like(gradient)
    residual = -gradient
    direction = residual.copy()
    residual_norm2 = residual @ residual
    steps = 0
    while math.sqrt(residual_norm2) > tolerance and steps < max_steps:
        curvature = hvp(direction)
        steps += 1
        d_h_d = direction @ curvature
        if not d_h_d > 0:
            raise FloatingPointError(f"steihaug_cg: dᵀHd = {d_h_d} ≤ 0, the Hessian is not positive definite")
        alpha = residual_norm2 / d_h_d
        candidate = step + alpha * direction
        if np.linalg.norm(candidate) >= radius:
            tau = _to_boundary(step, direction, radius)
            return step + tau * direction, residual - tau * curvature, steps, True
        step = candidate
        residual = residual - alpha * curvature
        new_norm2 = residual @ residual
        direction = residual + (new_norm2 / residual_norm2) * direction
        residual_norm2 = new_norm2
    return step, residual, steps, False


def _to_boundary(step: Vector, direction: Vector, radius: float) -> float:
    """τ ≥ 0 with ‖step + τ·direction‖ = radius (the positive root, computed without cancellation)."""
    s_d, s_s, d_d = step @ direction, step @ step, direction @ direction
    gap = radius * radius - s_s
    root = math.sqrt(s_d * s_d + d_d * gap)
    return gap / (s_d + root) if s_d >= 0 else (root - s_d) / d_d


def tron(
    value: Callable[[Vector], float],
    value_and_gradient: Callable[[Vector], tuple[float, Vector]],
    hvp: Callable[[Vector, Vector], Vector],
    x0: Vector,
    settings: Settings = Settings(),
    callback: Callable[[Vector, Iteration], None] | None = None,
) -> Result:
    """Minimise f from ``x0``. ``hvp(x, v)`` is ∇²f(x)·v at the last accepted point;
    ``callback(x, iteration)`` is called after every outer iteration (for traces)."""
    s = settings
    x = np.array(x0, dtype=np.float64, copy=True)
    f, g = value_and_gradient(x)
    g_norm = g0_norm = float(np.linalg.norm(g))
    radius = g0_norm
    history: list[Iteration] = []
    converged = g_norm <= s.epsilon * g0_norm or g_norm == 0.0
    for iteration in range(1, s.max_iterations + 1):
        if converged:
            break
        step, residual, cg_steps, _ = steihaug_cg(
            g, functools.partial(hvp, x), radius, s.cg_tolerance * g_norm, s.max_cg_steps
        )
        g_s = float(g @ step)
        predicted = -0.5 * (g_s - float(step @ residual))  # −(gᵀs + ½ sᵀHs), as r = −g − Hs
        f_new = value(x + step)
        actual = f - f_new
        step_norm = float(np.linalg.norm(step))
        if iteration == 1:
            radius = min(radius, step_norm)
        curvature = f_new - f - g_s  # the 1-D quadratic's second-order term, ×½
        alpha = s.sigma3 if curvature <= 0 else max(s.sigma1, -0.5 * g_s / curvature)
        if actual < s.eta0 * predicted:
            radius = min(max(alpha, s.sigma1) * step_norm, s.sigma2 * radius)
        elif actual < s.eta1 * predicted:
            radius = max(s.sigma1 * radius, min(alpha * step_norm, s.sigma2 * radius))
        elif actual < s.eta2 * predicted:
            radius = max(s.sigma1 * radius, min(alpha * step_norm, s.sigma3 * radius))
        else:
            radius = max(radius, min(alpha * step_norm, s.sigma3 * radius))
        accepted = actual > s.eta0 * predicted
        if accepted:
            x = x + step
            f, g = value_and_gradient(x)
            g_norm = float(np.linalg.norm(g))
            converged = g_norm <= s.epsilon * g0_norm
        ratio = actual / predicted if predicted != 0 else math.nan
        record = Iteration(iteration, f, g_norm, radius, cg_steps, accepted, ratio)
        history.append(record)
        log.info(
            "tron %d: f %.10g |g| %.3e radius %.3e cg %d %s",
            iteration,
            f,
            g_norm,
            radius,
            cg_steps,
            "accepted" if accepted else "rejected",
        )
        if callback is not None:
            callback(x, record)
        if abs(actual) <= 1e-12 * abs(f) and abs(predicted) <= 1e-12 * abs(f):
            log.warning("tron: the predicted and actual reductions are below rounding; stopping")
            break
    return Result(x, f, g_norm, converged, history)

"""Bethe projections (jax): the kernels of ``implementations._bethe`` on this backend's exact
chain. The energies are registered as pytrees, so an energy passes through ``jax.jit`` as an
argument (its arrays traced) while the other options stay static; the solver's result is held
fixed by ``stop_gradient`` where the losses use it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import xlogy

from .. import energies
from .._bethe import bethe_kernels
from . import _chain, _fixed_point, _scores

for _energy in (
    energies.Measurements,
    energies.UnigramTemplates,
    energies.WordTemplates,
    energies.PoissonCounts,
    energies.Total,
):
    jax.tree_util.register_dataclass(
        _energy, data_fields=[field.name for field in dataclasses.fields(_energy)], meta_fields=[]
    )


def _without_gradient(function: Callable[..., Any], *arguments: Any) -> Any:
    return jax.lax.stop_gradient(function(*arguments))


solve, marginals, decode, log_partition, loss, partial_loss = bethe_kernels(
    jnp, _chain, _scores, _fixed_point, xlogy, _without_gradient
)

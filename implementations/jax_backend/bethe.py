"""Bethe projections (jax): the kernels of ``implementations.kernels.bethe`` on this backend's
exact chain. The energies are registered as pytrees, so an energy passes through ``jax.jit`` as an
argument (its arrays traced) while the other options stay static; the solver's result is held
fixed by ``stop_gradient`` where the losses use it (``ops.without_gradient``)."""

from __future__ import annotations

import dataclasses

import jax

from .. import energies
from ..kernels.bethe import bethe_kernels
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

solve, marginals, decode, log_partition, loss, partial_loss = bethe_kernels(_chain, _scores, _fixed_point)

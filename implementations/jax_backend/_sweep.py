"""BCRF's sweep on the CPU in JAX: IBP iterations on a linear state of a large per-position kernel
in one pass along each sequence (``implementations/_sweep.c``), every arc block read from memory
once for :data:`DEPTH` iterations, called from a jitted computation through XLA's FFI
(``_sweep_ffi.cc``). XLA's batched matrix–vector products read the arcs well below the memory's
bandwidth; the sweep's iterations take what torch's do (docs/derivations.md §3.12, *The sweep*).

The handler is built at first use beside the C source (:func:`implementations._sweep.library`,
with jaxlib's FFI headers and the host's C++ compiler) and registered for the CPU; where it cannot
be built, :func:`available` is false, with one warning, and the iterations run as XLA's. The call
is not differentiable: the bcrf package differentiates the iterations XLA would run in its place."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jax
import jax.numpy as jnp
import jaxlib
import numpy as np
from jax import Array

from .._sweep import DEPTH, FROM_TAGS, library

GLUE = Path(__file__).with_name("_sweep_ffi.cc")
#: The FFI target and the handler's symbol of each dtype
_TARGETS = {
    np.dtype(np.float32): ("crfbench_bcrf_sweep_f32", "IbpSweepF32"),
    np.dtype(np.float64): ("crfbench_bcrf_sweep_f64", "IbpSweepF64"),
}

#: A linear state (jax_backend/bcrf/sweep.py): the scalings (B, 2, P, T) of the even and the odd nodes,
#: ``u`` then ``v``, over their vector's largest, their log shifts (B, 2, P), and the smallest live
#: scaling any projection wrote (B,), over its vector's largest.
LinearState = tuple[tuple[Array, Array], tuple[Array, Array], Array]


@cache
def _registered() -> bool:
    """Whether the handler is built and registered (one warning where it cannot be built)."""
    # jaxlib's version in the name: its headers define the handler's binary interface
    loaded = library(f"sweep-xla-{jaxlib.__version__}", (GLUE,), (Path(jax.ffi.include_dir()),))
    if loaded is None:
        return False
    for target, symbol in _TARGETS.values():
        jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(getattr(loaded, symbol)), platform="cpu")
    return True


def available(dtype: jnp.dtype, num_tags: int) -> bool:
    """Whether the sweep runs a kernel of ``num_tags`` tags in ``dtype`` (float32 or float64, at
    least :data:`FROM_TAGS` tags, the handler registered). It runs on the CPU alone: the caller
    picks it for that platform (``lax.platform_dependent``)."""
    return np.dtype(dtype) in _TARGETS and num_tags >= FROM_TAGS and _registered()


def iterations(arcs: Array, lengths: Array, state: LinearState, first: int, count: int) -> LinearState:
    """``count`` IBP iterations on ``state`` (:data:`LinearState`), each projecting the inner nodes
    of parity ``first`` first. ``arcs``: the kernel's (T, T) blocks (B, N-1, T, T), which the
    handler reads parity by parity in place; ``lengths`` (B,). :func:`available` must hold."""
    if not _registered():
        raise RuntimeError("bcrf sweep: the XLA handler could not be built")
    (even, odd), (even_shift, odd_shift), least = state
    operands = (even, odd, even_shift, odd_shift, least)
    call = jax.ffi.ffi_call(
        _TARGETS[np.dtype(even.dtype)][0],
        tuple(jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands),
        vmap_method="sequential",
        input_output_aliases={2 + k: k for k in range(len(operands))},  # in place: after arcs, lengths
    )
    new = call(
        arcs,
        lengths.astype(jnp.int32),
        *operands,
        first=np.int64(first),
        count=np.int64(count),
        depth=np.int64(DEPTH),
    )
    return (new[0], new[1]), (new[2], new[3]), new[4]

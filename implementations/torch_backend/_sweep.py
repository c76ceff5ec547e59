"""BCRF's sweep on the CPU in torch: IBP iterations on a linear state of a large per-position
kernel in one pass along each sequence (``implementations/_sweep.c``), reading every arc block from
memory once for :data:`DEPTH` iterations where two compiled projections read it twice an
iteration, several times faster (docs/derivations.md §3.12, *The sweep*).

The library (:func:`implementations._sweep.library`) is called through :mod:`ctypes`, whose calls
release the GIL: with several torch threads the sequences are shared among as many Python threads.
Where it cannot be built, :func:`available` is false, with one warning, and the projections run
compiled as before."""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import torch
from torch import Tensor

from .._sweep import DEPTH, FROM_TAGS, library

_FUNCTIONS = {torch.float32: "ibp_sweep_f32", torch.float64: "ibp_sweep_f64"}


@cache
def _library() -> ctypes.CDLL | None:
    """The loaded sweep with its functions' signatures, or ``None`` (one warning) where it cannot
    be built or loaded."""
    loaded = library("sweep")
    if loaded is None:
        return None
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    for name in _FUNCTIONS.values():
        function = getattr(loaded, name)
        function.restype = ctypes.c_int
        function.argtypes = [size, size, ctypes.c_int, pointer, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        function.argtypes += [pointer, size, size] * 2 + [pointer, size, pointer] * 2 + [pointer]
    return loaded


def available(device: torch.device, dtype: torch.dtype, num_tags: int) -> bool:
    """Whether the sweep runs a kernel of ``num_tags`` tags in ``dtype`` on ``device``: CPU,
    float32 or float64, at least :data:`FROM_TAGS` tags, and a library built."""
    return device.type == "cpu" and dtype in _FUNCTIONS and num_tags >= FROM_TAGS and _library() is not None


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, thread_name_prefix="bcrf-sweep")


def iterations(
    kernels: tuple[Tensor, Tensor],
    lengths: Tensor,
    scalings: tuple[Tensor, Tensor],
    shifts: tuple[Tensor, Tensor],
    smallest: Tensor,
    first: int,
    count: int = 1,
) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor], Tensor]:
    """``count`` IBP iterations on a linear state, each projecting the inner nodes of parity
    ``first`` first: new scalings (B, 2, P_p, T) and shifts (B, 2, P_p, 1) of each parity p, and
    the smallest live scaling written (B,), at most ``smallest``. ``kernels``: the (T, T) blocks of
    the even and the odd arcs (B, G_p, T, T), each block contiguous; ``lengths`` (B,). The
    iterations run sequence by sequence, :data:`DEPTH` to a sweep. The inputs are not changed.
    :func:`available` must hold."""
    function = getattr(_library(), _FUNCTIONS[smallest.dtype])
    new = [x.clone(memory_format=torch.contiguous_format) for x in (*scalings, *shifts, smallest)]
    for kernel in kernels:
        if kernel.stride()[-2:] != (kernel.shape[-1], 1):
            raise ValueError(f"bcrf sweep: arc blocks must be contiguous, got strides {kernel.stride()}")
    lengths = lengths.to(torch.int64).contiguous()
    arguments = [scalings[0].shape[-1], lengths.data_ptr(), first, count, DEPTH]
    for kernel in kernels:
        arguments += [kernel.data_ptr(), kernel.stride(0), kernel.stride(1)]
    for scaling, shift in zip(new[:2], new[2:4], strict=True):
        arguments += [scaling.data_ptr(), scaling.shape[2], shift.data_ptr()]
    arguments.append(new[4].data_ptr())
    batch, threads = len(lengths), min(torch.get_num_threads(), len(lengths))
    bounds = [batch * k // threads for k in range(threads + 1)]
    spans = [(bounds[k], bounds[k + 1]) for k in range(threads) if bounds[k] < bounds[k + 1]]
    if len(spans) == 1:
        codes = [function(*spans[0], *arguments)]
    else:
        codes = list(_pool(threads).map(lambda span: function(*span, *arguments), spans))
    if any(codes):
        raise MemoryError("bcrf sweep: no work space")
    return (new[0], new[1]), (new[2], new[3]), new[4]

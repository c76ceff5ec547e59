"""BCRF's sweep on the CPU: IBP iterations on the linear state of a large per-position kernel in
one pass along each sequence (``_sweep.c``), reading every arc block from memory once for
:data:`DEPTH` iterations where two compiled projections read it twice an iteration. One thread at
(8, 256, 128): 3.4–4.1 ms an iteration against 12.3 (docs/derivations.md §3.12, *The sweep*).

The C source is built at first use with the host's C compiler (``$CC``, else ``cc``; the one
inductor needs too), for this machine (``-march=native``), into a cache keyed by the source,
the flags and the host (``$CRFBENCH_CACHE``, else ``~/.cache/crfbench``), and loaded with
:mod:`ctypes`, whose calls release the GIL: with several torch threads the sequences are shared
among as many Python threads. Where it cannot be built, :func:`available` is false, with one
warning, and the projections run compiled as before."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("_sweep.c")
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd", "-shared", "-fPIC")
#: x86 compilers split 64-byte vectors in two unless told that the machine prefers them whole
X86_FLAGS = ("-mprefer-vector-width=512",)
_FUNCTIONS = {torch.float32: "ibp_sweep_f32", torch.float64: "ibp_sweep_f64"}
#: Iterations a sweep takes at once (``_sweep.c``): its 2 DEPTH arc blocks in cache at a time
DEPTH = 4


def _flags() -> tuple[str, ...]:
    return FLAGS + (X86_FLAGS if platform.machine().lower() in ("x86_64", "amd64") else ())


def _cache_dir() -> Path:
    return Path(os.environ.get("CRFBENCH_CACHE") or Path.home() / ".cache" / "crfbench")


def _build(compiler: str) -> Path:
    """The shared library of ``SOURCE`` for this host, built unless cached (written whole or
    not at all: built under a temporary name, then renamed)."""
    key = hashlib.sha256(
        b"\0".join(x.encode() for x in (SOURCE.read_text(), compiler, *_flags(), platform.node()))
    ).hexdigest()[:16]
    library = _cache_dir() / f"sweep-{key}.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
            built = Path(scratch) / library.name
            subprocess.run(
                [compiler, *_flags(), "-o", str(built), str(SOURCE)],
                check=True,
                capture_output=True,
                text=True,
            )
            os.replace(built, library)
    return library


@cache
def _library() -> ctypes.CDLL | None:
    """The loaded sweep, or ``None`` (with a warning) where it cannot be built or loaded."""
    compiler = os.environ.get("CC") or shutil.which("cc")
    try:
        if compiler is None:
            raise OSError("no C compiler (set CC)")
        library = ctypes.CDLL(str(_build(compiler)))
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or error
        warnings.warn(
            f"bcrf: the C sweep could not be built, IBP runs compiled ({detail})",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    pointer, size = ctypes.c_void_p, ctypes.c_int64
    for name in _FUNCTIONS.values():
        function = getattr(library, name)
        function.restype = ctypes.c_int
        function.argtypes = [size, size, ctypes.c_int, pointer, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        function.argtypes += [pointer, size, size] * 2 + [pointer, size, pointer] * 2 + [pointer]
    return library


#: The sweep runs from this many tags on, where a vector of 16 float32 covers a kernel's row:
#: below, the compiled projections are faster (one thread, (16, 2048, 8): 5.7 against 5.2 ms an
#: iteration; (64, 512, 17): 6.8 against 10.6).
FROM_TAGS = 16


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

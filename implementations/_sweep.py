"""BCRF's sweep on the CPU, what both backends share: the C source (``_sweep.c``: IBP iterations
on the linear state of a per-position kernel in one pass along each sequence, every arc block read
from memory once for :data:`DEPTH` iterations), where it applies, and its build.

The source is built at first use with the host's compiler for this machine (``-march=native``),
with a backend's own glue where it has some (JAX's XLA FFI handler, C++), into a cache keyed by
the sources, the compiler, the flags and the host (``$CRFBENCH_CACHE``, else
``~/.cache/crfbench``), written whole or not at all, and loaded with :mod:`ctypes`. Where it
cannot be built, :func:`library` warns once and returns ``None``, and the backend iterates as it
did without it (docs/derivations.md §3.12, *The sweep*)."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Sequence
from functools import cache
from pathlib import Path

SOURCE = Path(__file__).with_name("_sweep.c")
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-fopenmp-simd", "-shared", "-fPIC")
#: x86 compilers split 64-byte vectors in two unless told that the machine prefers them whole
X86_FLAGS = ("-mprefer-vector-width=512",)
#: Iterations a sweep takes at once (``_sweep.c``): its 2 DEPTH arc blocks in cache at a time
DEPTH = 4
#: The sweep runs from this many tags on, where a vector of 16 float32 covers a kernel's row:
#: below, torch's compiled projections are faster (docs/derivations.md, "Measurements behind the
#: kernels").
FROM_TAGS = 16


def _flags() -> tuple[str, ...]:
    return FLAGS + (X86_FLAGS if platform.machine().lower() in ("x86_64", "amd64") else ())


def _cache_dir() -> Path:
    return Path(os.environ.get("CRFBENCH_CACHE") or Path.home() / ".cache" / "crfbench")


def _compile(compiler: str, name: str, glue: Sequence[Path], include: Sequence[Path]) -> Path:
    """The shared library of :data:`SOURCE` (compiled as C) and ``glue`` (as C++), built unless
    cached: under a temporary name, then renamed."""
    headers = [f"-I{path}" for path in include]
    parts = (SOURCE.read_text(), *(path.read_text() for path in glue), compiler, *_flags(), *headers)
    key = hashlib.sha256(b"\0".join(x.encode() for x in (*parts, platform.node()))).hexdigest()[:16]
    library = _cache_dir() / f"{name}-{key}.so"
    if not library.exists():
        library.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
            built = Path(scratch) / library.name
            sources = ["-x", "c", str(SOURCE)] + (["-x", "c++", *map(str, glue)] if glue else [])
            subprocess.run(
                [compiler, *_flags(), *headers, "-o", str(built), *sources],
                check=True,
                capture_output=True,
                text=True,
            )
            os.replace(built, library)
    return library


@cache
def library(name: str, glue: tuple[Path, ...] = (), include: tuple[Path, ...] = ()) -> ctypes.CDLL | None:
    """The sweep's library ``name`` (with ``glue``, C++ sources compiled beside it with the headers
    of ``include``), loaded, or ``None`` with one warning where it cannot be built or loaded: no
    compiler (``$CC``, else ``cc``; with glue ``$CXX``, else ``c++``), or one that fails."""
    variable, default = ("CXX", "c++") if glue else ("CC", "cc")
    compiler = os.environ.get(variable) or shutil.which(default)
    try:
        if compiler is None:
            raise OSError(f"no compiler (set {variable})")
        return ctypes.CDLL(str(_compile(compiler, name, glue, include)))
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", None) or error
        warnings.warn(
            f"bcrf: the C sweep could not be built ({name}), IBP runs without it ({detail})",
            RuntimeWarning,
            stacklevel=4,
        )
        return None

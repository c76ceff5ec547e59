"""Wall-clock timing shared by the timing stage, the Newton study and the benchmarks."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_seconds(call: Callable[[], object], repeats: int = 5) -> float:
    """Fastest of ``repeats`` timed calls of ``call`` (a minimum: the least disturbed run)."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        call()
        times.append(time.perf_counter() - began)
    return min(times)

"""``set_threads`` holds JAX's CPU runtime to one thread, as it does torch (each check in a fresh
process: XLA's pool is sized once, when its backend starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("jax")

#: A large element-wise pass, which XLA splits over its whole pool: the process's CPU time over the
#: wall time it takes is the number of threads that ran it, where the other CPUs are idle; and the
#: size of that pool, its threads counted by name (``tf_XLAEigen``), which no load changes.
PROGRAM = """
import json, os, sys, time
import jax, jax.numpy as jnp
from crfbench.environment import set_threads
allowed = os.sched_getaffinity(0)
if sys.argv[1] == "one":
    set_threads(1)
step = jax.jit(lambda x: x + 1.0, donate_argnums=0)
x = jax.block_until_ready(step(jnp.zeros(2**25, jnp.float32)))
wall, cpu = time.perf_counter(), time.process_time()
for _ in range(20):
    x = jax.block_until_ready(step(x))
threads = (time.process_time() - cpu) / (time.perf_counter() - wall)
names = [open(f"/proc/self/task/{task}/comm").read().strip() for task in os.listdir("/proc/self/task")]
pool = sum(name.endswith("XLAEigen") for name in names)
print(json.dumps({"threads": threads, "pool": pool, "restored": os.sched_getaffinity(0) == allowed}))
"""


def _run(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(len(getattr(os, "sched_getaffinity", lambda _: ())(0)) < 2, reason="needs 2 CPUs")
def test_set_threads_holds_xla_to_one_thread():
    default, one = _run("default"), _run("one")
    if not default["pool"]:
        pytest.skip("XLA's pool threads are not named tf_XLAEigen here: nothing to count")
    assert default["pool"] >= 2, f"XLA's default pool holds {default['pool']} thread: nothing to tell apart"
    assert one["pool"] == 1, f"set_threads(1) left XLA a pool of {one['pool']} threads"
    assert one["restored"], "the process's CPUs were not given back"
    # The threads that ran the pass, where the other CPUs are idle (under load, as beside another
    # test worker, the default pool cannot show its second thread)
    if default["threads"] >= 1.25:
        assert one["threads"] < 1.15, f"set_threads(1) left XLA on {one['threads']:.2f} CPUs"

"""Test-suite configuration: hypothesis profiles and deterministic single-threaded torch.

Select a hypothesis profile with the environment variable ``HYPOTHESIS_PROFILE``:

- ``ci`` (default): few examples, derandomised, no deadline -- the whole suite in a few minutes
  on two cores;
- ``dev``: more examples, still no deadline;
- ``thorough``: many examples, for a long run before a release.
"""

from __future__ import annotations

import os

import torch
from hypothesis import HealthCheck, settings

torch.set_num_threads(1)

_COMMON = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
settings.register_profile("ci", max_examples=20, derandomize=True, **_COMMON)
settings.register_profile("dev", max_examples=100, **_COMMON)
settings.register_profile("thorough", max_examples=1000, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

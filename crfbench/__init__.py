"""crfbench: the experiment engine (datasets, encoders, training, evaluation, timing, reports).

It reaches inference only through ``implementations.get(...)`` and the contract. Its modules land
with the experiment-engine issue.
"""

__version__ = "0.1.0"

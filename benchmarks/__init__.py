"""asv scaling suite (sequence length x tag-set size for every method and backend).

The suite itself lands with the asv issue; the pytest-benchmark comparison of the training
losses is in ``tests/benchmarks/``.
"""

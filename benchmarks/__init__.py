"""asv scaling suite: every method and backend over sequence length N x tag-set size T.

``common`` holds the grid (``CRFBENCH_ASV_PROFILE``), the methods as benchmarked and the timed
calls; ``bench_inference`` times marginals, decoding and the training step (and their memory),
``bench_quality`` tracks what the approximations give up, ``bench_roofline`` relates IBP to the
machine's memory bandwidth and ``bench_peers`` compares with the PyTorch CRF libraries. Commands:
docs/benchmarks.md.
"""

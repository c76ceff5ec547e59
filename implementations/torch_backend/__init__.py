"""PyTorch backend of the inference contract: one kernel module per method (``crf``, ``crf_scan``,
``bcrf``, ``meanfield``, ``unstructured``, ``sparsemap``, ``bethe``: the mathematics only, wrapped by
``implementations.public``) over private shared pieces (``_scores`` folding and masks,
``_semiring`` log-space primitives, ``_chain`` and ``_tree`` exact engines, ``_tokens`` per-token
losses, ``_fixed_point`` the iteration loop, ``_validate`` the backend's input checks)."""

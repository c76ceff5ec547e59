"""PyTorch backend of the inference contract: one public module per method (``crf``,
``crf_scan``, ``bcrf``, ``meanfield``, ``unstructured``) over private shared pieces (``_scores``
folding and masks, ``_semiring`` log-space primitives, ``_chain`` and ``_tree`` exact engines,
``_tokens`` per-token losses, ``_validate`` input checks)."""

"""JAX backend of the inference contract: one public module per method (``crf``, ``crf_scan``,
``bcrf``, ``meanfield``, ``unstructured``) over private shared pieces (``_scores`` folding and
masks, ``_semiring`` log-space primitives, ``_chain`` and ``_tree`` exact engines, ``_tokens``
per-token losses, ``_validate`` input checks).

Every public function is ``jax.jit``-able with its keyword options static, e.g.
``jax.jit(crf.loss, static_argnames=("validate",))``; under tracing only shape and dtype checks
run (see ``_validate``). Results keep the input's float dtype; the library never changes
``jax_enable_x64``.
"""

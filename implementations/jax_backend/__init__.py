"""JAX backend of the inference contract: one kernel module per method (``crf``, ``crf_scan``,
``bcrf``, ``meanfield``, ``unstructured``, ``sparsemap``, ``bethe``: the mathematics only, wrapped by
``implementations.public``) over private shared pieces (``_scores`` folding and masks,
``_semiring`` log-space primitives, ``_chain`` and ``_tree`` exact engines, ``_tokens`` per-token
losses, ``_fixed_point`` the iteration loop, ``_validate`` the backend's input checks).

Every contract function is ``jax.jit``-able with its keyword options static (Bethe's ``energy``
is a pytree of arrays and goes in traced, as an argument), e.g.
``jax.jit(implementations.get("crf", "jax").loss, static_argnames=("validate",))``; under
tracing only shape and dtype checks run (see ``_validate``), and ``checked`` (``jax_backend.checked``)
stages the value checks too (checkify). Results keep the input's float
dtype; the library never changes ``jax_enable_x64``.
"""

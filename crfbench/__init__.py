"""crfbench: the experiment engine around the inference core (``implementations``).

It reaches inference through ``implementations.get(method, backend)`` and the contract
(``docs/contract.md``); only ``agreement`` also calls the NumPy oracles of
``implementations.reference``. Modules, by job:

- Inputs: ``data`` (the datasets, tag schemes, corpus checksums), ``config`` (one run's
  settings), ``models`` (the scorer: encoders and emission/transition heads).
- One run: ``batching`` (mini-batches and their targets), ``objectives`` (the paper's losses and
  decoders), ``experiment`` (what training, evaluation and timing share, and the run directory's
  files), ``train``, ``tuning`` (the learning rate chosen on dev), ``evaluate``, ``sweep``
  (decoding over iteration counts) and ``timing``.
- Checks and measurements: ``metrics`` (task scores, constraint violations), ``agreement``
  (backends against each other and the oracles), ``asv_results`` (the asv suite's results as
  ``results/scaling.csv``), ``asv_history`` (one asv history per machine), ``data_check`` (the
  data folder's state, fetching the public corpora).
- Results: ``aggregate`` (per-run outputs gathered into the results tables), ``schema`` (columns
  of the compact tables), ``report`` (the paper's tables, figures and claim ledger from them).
- Plumbing: ``cli`` (``python -m crfbench <command>``), ``io`` (atomic writes, one-line input
  errors), ``environment`` (device, library versions and code revision of a result, and the refusal
  of a checkout with uncommitted changes), ``console`` (per-epoch log lines, progress bars on a
  terminal only).
"""

__version__ = "0.1.0"

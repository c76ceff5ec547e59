"""The paper's tables and figures regenerated from our tidy results (``results/metrics.csv`` and
``results/timing.csv``), with the paper's values beside ours: ``render_report`` writes them all."""

from .report import NOTE_KEYS, render_report

__all__ = ["NOTE_KEYS", "render_report"]

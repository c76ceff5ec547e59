"""``python -m crfbench``: see :mod:`crfbench.cli`."""

import sys

from .cli import main

sys.exit(main())

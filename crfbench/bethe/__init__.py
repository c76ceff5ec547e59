"""The Bethe-projection paper's experiments (Vilnis et al. 2015; digest §4): learning by
Algorithm 3 (``learning``), and the OCR, citation and collective-graphical-model studies, each a
module that turns its data into a results table. Inference itself is the ``bethe`` method of
``implementations``; the energies are ``implementations.energies``."""

#: Table 5's edge cardinalities s and the near-square grids whose C² comes closest (``cgm``); here,
#: without the study's imports, for the command line's choices.
GRIDS = {"s625": (5, 5), "s10k": (10, 10), "s50k": (14, 16)}

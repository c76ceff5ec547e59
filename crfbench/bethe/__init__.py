"""The Bethe-projection paper's experiments (Vilnis et al. 2015; digest §4): learning by
Algorithm 3 (``learning``), and the OCR, citation and collective-graphical-model studies, each a
module that turns its data into a results table. Inference itself is the ``bethe`` method of
``implementations``; the energies are ``implementations.energies``."""

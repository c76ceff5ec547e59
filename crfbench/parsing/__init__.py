"""Dependency parsing for the SparseMAP paper's Table 1 (claim sparsemap-1): UD treebanks with gold
heads (``treebank``), the Kiperwasser & Goldberg BiLSTM arc-factored parser (``model``), its
training losses (``losses``: structured SVM, CRF, SparseMAP, m-SparseMAP), training with
learning-rate selection on dev (``train``) and attachment scores (``evaluate``).

The tree inference (partition function, marginals, Chu-Liu-Edmonds) comes from the
dependency-tree methods of ``implementations`` (``tree-crf``, and ``tree-sparsemap`` when it
exists); this package never re-implements it.
"""

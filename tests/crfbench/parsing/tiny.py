"""What the parser tests train: a parser small enough to train in seconds."""

from crfbench.parsing.model import ParserConfig

SMALL = ParserConfig(word_dim=32, upos_dim=8, lstm_dim=32, mlp_dim=32)

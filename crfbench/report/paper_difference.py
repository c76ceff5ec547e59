"""The paper's own difference for one ledger cell, read from the free text of ``claims.csv``'s
``paper_difference`` column: the one place that text is parsed.

The column holds a value, or values tagged with the tasks they are about, e.g.
``-0.8 to +0.3 (POS/seg; -0.2 on NER)``, ``0.0 to +0.9 (POS); +9.1 to +14.3 (seg)``, ``-9.6 / -13.0``,
``x1.2 to x7.3``, ``about 0``. A value is a number, a range "a to b", a list "a / b / c" (the paper's
values for several datasets, read as the range they span) or "up to b" (from no effect, 0 or x1, to
b); numbers prefixed by "x" are
ratios (speed-ups), the others differences in points. Tags ("(POS)", "(POS/seg)", "on NER") name the
tasks ("pos", "seg", "ner") a value is about; an untagged value is about every task. Text that states
no difference ("qualitative", "none", "9.8 mean") parses to None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The task names of ``crfbench.report.layout.TASKS``, as the paper's text spells them.
TASK_WORDS = {"pos": "pos", "seg": "seg", "ner": "ner"}
_NUMBER = r"[+-]?x?\d+(?:\.\d+)?"
_VALUE = re.compile(
    rf"^(?:about\s+(?P<about>{_NUMBER})|up to\s+(?P<upto>{_NUMBER})"
    rf"|(?P<low>{_NUMBER})\s+to\s+(?P<high>{_NUMBER})|(?P<list>{_NUMBER}(?:\s*/\s*{_NUMBER})*))$"
)
_TAGGED = re.compile(r"^(?P<value>.+?)(?:\s*\((?P<paren>[^()]*)\)|\s+on\s+(?P<on>[A-Za-z/]+))?$")
#: Remarks that qualify a value without changing it.
_REMARKS = re.compile(r"\s*\((?:uncertain)\)\s*$")


@dataclass(frozen=True)
class PaperRange:
    """The paper's difference for some tasks: the interval [low, high], in points or as a ratio."""

    low: float
    high: float
    ratio: bool  # an "x" value (a speed-up), not a difference in points

    @property
    def middle(self) -> float:
        """The point the ratio ours ÷ paper's divides by: the middle of the range."""
        return (self.low + self.high) / 2


@dataclass(frozen=True)
class PaperDifference:
    """The paper's difference per task; ``default`` for tasks no tag names (None: not stated)."""

    by_task: dict[str, PaperRange]
    default: PaperRange | None

    def for_task(self, task: str) -> PaperRange | None:
        """The paper's difference on a cell of ``task`` ("pos", "seg", "ner", or any other task)."""
        return self.by_task.get(task, self.default)


def _number(text: str) -> tuple[float, bool]:
    ratio = "x" in text
    return float(text.replace("x", "")), ratio


def _value(text: str) -> PaperRange | None:
    """One value ("a", "a to b", "a / b", "up to b", "about a") as a range; None if it is none."""
    found = _VALUE.match(text.strip())
    if found is None:
        return None
    if found["list"] is not None:
        numbers = [_number(part) for part in found["list"].split("/")]
    elif found["low"] is not None:
        numbers = [_number(found["low"]), _number(found["high"])]
    elif found["upto"] is not None:  # from no effect (0 points, or x1) up to the number
        value, ratio = _number(found["upto"])
        numbers = [(1.0 if ratio else 0.0, ratio), (value, ratio)]
    else:
        numbers = [_number(found["about"])]
    values = [value for value, _ in numbers]
    ratios = {ratio for _, ratio in numbers}
    if len(ratios) > 1:
        return None  # a ratio and a difference in one value: not a value
    return PaperRange(min(values), max(values), ratios.pop())


def _tasks(words: str) -> list[str] | None:
    """The tasks a tag such as "POS/seg" names; None when it names no task (a remark)."""
    names = [TASK_WORDS.get(word.strip().lower()) for word in words.split("/")]
    return None if any(name is None for name in names) else [name for name in names if name]


def parse_paper_difference(text: str) -> PaperDifference | None:
    """The paper's difference stated by ``text`` (see the module's docstring); None when the text
    states none. A tag inside parentheses may carry further values after a ";"
    ("-0.8 to +0.3 (POS/seg; -0.2 on NER)"), which are read as parts of their own."""
    flat = re.sub(r"\(([^;()]*);\s*([^()]*)\)", r"(\1); \2", str(text).strip())
    by_task: dict[str, PaperRange] = {}
    default = None
    for part in filter(None, (piece.strip() for piece in flat.split(";"))):
        tagged = _TAGGED.match(_REMARKS.sub("", part))
        if tagged is None:
            return None
        value = _value(tagged["value"])
        if value is None:
            return None
        words = tagged["paren"] if tagged["paren"] is not None else tagged["on"]
        tasks = _tasks(words) if words is not None else []
        if tasks is None:
            return None
        if not tasks:
            default = value
        for task in tasks:
            by_task[task] = value
    if not by_task and default is None:
        return None
    return PaperDifference(by_task, default)

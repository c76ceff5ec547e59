"""The citation experiment (``crfbench.data.citation``, ``crfbench.bethe.citation``) on small
synthetic documents written here (never the real data): parsing nested and glued tags, strict
errors naming file and line and the repair rules, hierarchical BIO labels and the bounded label
set, the BIO masks, the count constraints' penalties, the convergence count, and a tiny end-to-end
run producing the tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from crfbench.bethe import citation as experiment
from crfbench.data import citation as data

torch.set_num_threads(1)

AUTHORS = (
    "<authors> <person> <person-first> E. </person-first> <person-last> Montroll , </person-last> </person> "
    "<person> <person-first> B. </person-first> <person-last> West </person-last> </person> </authors>"
)
VENUE = "<venue> In <booktitle> Proc. </booktitle> , <date> <year> 1979 </year> </date> </venue>"
LINE = f"<ref-marker> [1] </ref-marker> {AUTHORS} {VENUE}"


def labelled(line: str, min_segments: int = 1) -> list[tuple[str, str]]:
    citation = data.parse_line(line)
    return list(
        zip(citation.tokens, data.label_scheme([citation], min_segments).labels(citation), strict=True)
    )


# ----------------------------------------------------------------------------------------- parsing


def test_nested_tags_give_paths_and_glued_tags_split() -> None:
    citation = data.parse_line(
        "<venue> <thesis> B.A . thesis </thesis><institution> Swarthmore </institution> </venue> x"
    )
    assert citation.tokens == ("B.A", ".", "thesis", "Swarthmore", "x")
    assert [data.path_of(e) for e in citation.elements] == ["venue/thesis"] * 3 + ["venue/institution", ""]
    glued = data.parse_line("<note> <language>( in Russian ) </language> </note>")
    assert glued.tokens == ("(", "in", "Russian", ")") and not glued.repaired
    assert data.parse_line("<title> 2 @0 < 2 @1 </title>").tokens == ("2", "@0", "<", "2", "@1")


def test_bio_path_labels_start_a_segment_per_element() -> None:
    """Adjacent elements of one name are two segments; a parent's text around a child is two; text
    outside every tag is O."""
    assert labelled(LINE) == [
        ("[1]", "B-ref-marker"),
        ("E.", "B-authors/person/person-first"),
        ("Montroll", "B-authors/person/person-last"),
        (",", "I-authors/person/person-last"),
        ("B.", "B-authors/person/person-first"),
        ("West", "B-authors/person/person-last"),
        ("In", "B-venue"),
        ("Proc.", "B-venue/booktitle"),
        (",", "B-venue"),
        ("1979", "B-venue/date/year"),
    ]
    two = labelled("<title> a b </title> <title> c </title> d")
    assert [label for _, label in two] == ["B-title", "I-title", "B-title", "O"]


def test_same_name_nesting_is_merged() -> None:
    citation = data.parse_line(
        "<authors> <person> <person> <person-last> X </person-last> </person> </person> </authors>"
    )
    assert data.path_of(citation.elements[0]) == "authors/person/person-last"


def test_rare_paths_map_to_their_longest_kept_prefix() -> None:
    training = [data.parse_line("<venue> <pages> 1 </pages> </venue> <title> t </title>")] * 2
    training += [data.parse_line("<venue> <pages> 1 </pages> <chapter> Ch </chapter> </venue>")]
    scheme = data.label_scheme(training, min_segments=2)
    assert scheme.paths == ("venue/pages", "title")  # venue/chapter (1 segment) and venue (none) dropped
    assert scheme.tags == ("O", "B-venue/pages", "I-venue/pages", "B-title", "I-title")
    test = data.parse_line(
        "<title> <subtitle> s </subtitle> </title> <venue> <chapter> c d </chapter> </venue>"
    )
    assert scheme.labels(test) == ("B-title", "O", "O")
    with pytest.raises(ValueError, match="min_segments"):
        data.label_scheme(training, min_segments=0)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("<title> a </venue> </title>", "</venue> does not close"),
        ("<venue> <title> a </title>", "elements left open"),
        ("<person-first> C. </<person-first>", "broken tag '</'"),
        ("<title> </title>", "no tokens"),
    ],
)
def test_malformed_markup_names_file_and_line(line: str, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^refs\.docs:2: {message}"):
        data.parse_lines(["<title> fine </title>", line], "refs.docs")


def test_repair_closes_overlaps_drops_strays_and_closes_at_the_end() -> None:
    """``<note> … </venue> </note>``: ``</venue>`` closes the note too and the stray ``</note>`` is
    dropped; an unclosed element ends with the line."""
    citation = data.parse_line("<venue> <note> seen Nov </venue> </note> x <date> 1999", repair=True)
    assert citation.repaired
    assert [data.path_of(e) for e in citation.elements] == ["venue/note", "venue/note", "", "date"]
    assert not data.parse_line(LINE, repair=True).repaired


def test_read_docs_without_trailing_newline(tmp_path: Path) -> None:
    path = tmp_path / "x.docs"
    path.write_text(f"{LINE}\n<title> b </title>", encoding="utf-8")
    assert [len(c.tokens) for c in data.read_docs(path)] == [10, 1]
    path.write_text(f"{LINE}\n<title> b", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{path}:2: "):
        data.read_docs(path)
    with pytest.raises(ValueError, match="unknown split"):
        data.read_split(tmp_path, "validation")


def test_read_split_checks_the_manifest(tmp_path: Path) -> None:
    """The data dir's files are the distributed ones or nothing: a missing file and a file whose
    SHA-256 is not the manifest's are errors naming the path."""
    path = tmp_path / data.FILES["dev"]
    with pytest.raises(FileNotFoundError, match=f"^{path}: the citation dev file is missing"):
        data.read_split(tmp_path, "dev")
    path.parent.mkdir()
    path.write_text(LINE, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{path}: SHA-256 mismatch"):
        data.read_split(tmp_path, "dev")


# ----------------------------------------------------------------------------------------- the model's parts


def test_token_features_have_one_width_and_see_the_neighbours() -> None:
    rows = experiment.token_features(["Phys.", "1979", ","])
    assert len({len(row) for row in rows}) == 1
    assert "w-1=<s>" in rows[0] and "w+1=1979" in rows[0] and "shape=Xxx." in rows[0]
    assert "digits=True:True:True" in rows[1] and "punct=True" in rows[2] and "position=6" in rows[2]
    assert experiment.shape("Montroll") == "Xxx" and experiment.hashed("w=a", 8) in range(1, 8)


def test_bio_masks_forbid_exactly_the_invalid_moves() -> None:
    tags = ("O", "B-a", "I-a", "B-b", "I-b")
    transitions, start = experiment.bio_masks(tags)
    forbidden = {
        (tags[i], tags[j])
        for i, j in zip(*torch.nonzero(torch.isinf(transitions), as_tuple=True), strict=True)
    }
    assert forbidden == {
        ("O", "I-a"),
        ("B-b", "I-a"),
        ("I-b", "I-a"),
        ("O", "I-b"),
        ("B-a", "I-b"),
        ("I-a", "I-b"),
    }
    assert torch.isinf(start).tolist() == [False, False, True, False, True]


def one_hot(tags: tuple[str, ...], sequence: list[str]) -> torch.Tensor:
    """(1, N, T) node marginals of one tag sequence."""
    return torch.nn.functional.one_hot(torch.tensor([tags.index(t) for t in sequence]), len(tags))[None].to(
        experiment.DTYPE
    )


@pytest.mark.parametrize(
    ("name", "satisfied", "violated"),
    [
        ("at-most-one:title", ["B-title", "I-title", "B-last"], ["B-title", "B-title", "B-last"]),
        ("at-least-one:title", ["B-title", "B-last"], ["B-last", "I-last"]),
        ("not-fewer:first>=last", ["B-first", "B-last", "B-first"], ["B-first", "B-last", "B-last"]),
        ("not-fewer:last>=first", ["B-first", "B-last"], ["B-first", "B-first", "B-last"]),
    ],
)
def test_a_satisfied_constraint_costs_nothing_and_a_violated_one_costs(
    name: str, satisfied: list[str], violated: list[str]
) -> None:
    scheme = data.LabelScheme(("first", "last", "title"))
    candidates = experiment.constraints(scheme, pair_labels=2)
    assert len(candidates.names) == 2 * 3 + 2 and len(set(candidates.names)) == len(candidates.names)
    weights = torch.tensor([float(n == name) for n in candidates.names], dtype=experiment.DTYPE)
    energy = candidates.energy(weights)

    def penalty(sequence: list[str]) -> float:
        unary = one_hot(scheme.tags, sequence)
        return float(energy.value(torch, unary, None, torch.ones(unary.shape[:2])))

    assert penalty(satisfied) == 0.0
    assert penalty(violated) == pytest.approx(0.5)  # one count over the bound: ℓ̃(0) = ½
    kept = candidates.subset(weights > 0)
    assert kept.names == (name,) and kept.unary_weights.shape == (1, len(scheme.tags))


def test_iterations_to_converge_is_the_first_iteration_within_tolerance() -> None:
    errors = torch.tensor([[0.5, 0.5, 0.5], [0.01, 0.2, 0.3], [0.2, 0.001, float("nan")]])
    first, converged = experiment.iterations_to_converge(errors, tolerance=0.01, cap=3)
    assert first.tolist() == [2, 3, 3] and converged.tolist() == [True, True, False]


def test_a_smaller_tolerances_run_gives_the_larger_tolerances_counts() -> None:
    """The convergence table's shortcut: a citation's first iteration within 1e-2 is the same
    whether the solver stops at 1e-2 or runs on towards 1e-5."""
    generator = torch.Generator().manual_seed(0)
    scores = {
        "emissions": torch.randn(6, 7, 5, generator=generator),
        "transitions": torch.randn(5, 5, generator=generator),
        "lengths": torch.tensor([7, 3, 5, 1, 6, 2]),
    }
    energy = experiment.Constraints(
        ("a", "b"), torch.randn(2, 5, generator=generator), torch.tensor([0.5, -1.0])
    ).energy(torch.tensor([2.0, 1.0]))
    bethe = experiment.implementations.get("bethe", "torch")
    counts = []
    for tolerance in (1e-2, 1e-5):
        errors = bethe.solve(**scores, **experiment.bethe_options(energy, 40, tolerance)).errors
        counts.append(experiment.iterations_to_converge(errors, 1e-2, 40))
    assert counts[0][0].tolist() == counts[1][0].tolist() and counts[0][0].max() > 1
    assert counts[0][1].all()


# ----------------------------------------------------------------------------------------- end to end


def synthetic_line(rng: np.random.Generator) -> str:
    """A citation: 1–3 authors, a title, a journal and a year."""
    firsts, lasts = ["A.", "B.", "C.", "D."], ["Smith", "Jones", "Lee", "Kim", "Wu"]
    people = " ".join(
        f"<person> <person-first> {rng.choice(firsts)} </person-first> <person-last> {rng.choice(lasts)} , "
        "</person-last> </person>"
        for _ in range(rng.integers(1, 4))
    )
    title = " ".join(rng.choice(["on", "the", "theory", "of", "fields", "waves"], size=rng.integers(2, 6)))
    journal = rng.choice(["Phys . Rev .", "Nature", "J. Math ."])
    return (
        f"<authors> {people} </authors> <title> {title} . </title> <venue> <journal> {journal} </journal> "
        f"<date> <year> {rng.integers(1950, 2015)} </year> </date> </venue>"
    )


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(3)
    splits = {}
    for split, count in zip(data.FILES, (40, 16, 12), strict=True):
        path = root / f"{split}.docs"
        path.write_text("\n".join(synthetic_line(rng) for _ in range(count)), encoding="utf-8")
        splits[split] = data.read_docs(path)
    settings = experiment.Settings(
        buckets=2**12, batch_size=8, crf_epochs=3, energy_epochs=2, iterations=5, caps=(1, 5), pair_labels=3
    )
    return {"splits": splits, "settings": settings, "first": experiment.experiment(splits, settings, seed=1)}


def test_end_to_end_tables(tables: dict) -> None:
    out = tables["first"]
    assert {"scores", "iteration_cap", "iterations", "constraints", "curves", "timings", "settings"} <= set(
        out
    )
    scores = out["scores"]
    assert scores["model"].tolist() == ["chain-crf-baseline", "nonlocal-energies"]
    assert {"segment_f1", "dev_f1"} <= set(scores.columns)
    assert scores["segment_f1"].between(0, 100).all() and scores["segment_f1"].iloc[0] > 50  # it learns
    assert out["iteration_cap"].columns.tolist() == ["seed", "cap", "segment_f1"]
    assert out["iteration_cap"]["cap"].tolist() == [1, 5]
    iterations = out["iterations"]
    assert iterations.columns.tolist() == ["seed", "tolerance", "citation", "iterations", "converged"]
    assert len(iterations) == 2 * 12 and iterations["tolerance"].unique().tolist() == [1e-3, 1e-4]
    assert iterations["iterations"].between(1, 5).all()
    assert (out["constraints"]["weight"] > 0).all()
    assert out["timings"]["stage"].tolist()[0] == "features"


def test_per_citation_counts_give_the_tables_f1(tables: dict) -> None:
    """One row per (model, decoder, test citation); each decoder's span counts give the F1 of the
    scores and iteration-cap tables (seqeval's micro F1 is a ratio of sums over citations)."""
    out = tables["first"]
    rows = out["sentences"]
    decoders = rows.groupby(["loss", "decoder"], sort=False).size()
    assert list(decoders.index) == [
        ("chain-crf-baseline", "viterbi"),
        ("nonlocal-energies", "bethe-1"),
        ("nonlocal-energies", "bethe"),
    ]  # fmt: skip  (cap 5 is the test-time solver's own: "bethe")
    assert (decoders == 12).all() and (rows["seed"] == 1).all()

    def f1(part):
        return (
            100 * 2 * part["matched_spans"].sum() / (part["gold_spans"].sum() + part["predicted_spans"].sum())
        )

    scores = out["scores"].set_index("model")["segment_f1"]
    by_decoder = dict(tuple(rows.groupby("decoder")))
    assert f1(by_decoder["viterbi"]) == pytest.approx(scores["chain-crf-baseline"])
    assert f1(by_decoder["bethe"]) == pytest.approx(scores["nonlocal-energies"])
    caps = out["iteration_cap"].set_index("cap")["segment_f1"]
    assert f1(by_decoder["bethe-1"]) == pytest.approx(caps[1])


def test_end_to_end_is_deterministic_given_the_seed(tables: dict) -> None:
    again = experiment.experiment(tables["splits"], tables["settings"], seed=1)
    for name in ("scores", "iteration_cap", "iterations", "constraints"):
        assert again[name].equals(tables["first"][name]), name

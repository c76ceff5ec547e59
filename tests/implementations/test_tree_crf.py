"""``tree-crf``: the CRF over single-root dependency trees, in both backends, against enumeration.

Every check runs on padded batches of mixed lengths with garbage past each length (large scores
and ``-inf``, which the method must ignore), with and without forbidden arcs (a planted tree keeps
each sentence feasible), in float32 and float64: ``log Z``, the arc marginals and the decoded
tree's score equal the oracle (``implementations.reference.dependency``), the loss is
``log Z − score(gold)``, the marginals satisfy their closed forms, and torch equals jax.
"""

from __future__ import annotations

import numpy as np
import pytest

import implementations
from implementations import arborescence
from implementations.reference import dependency as reference
from implementations.reference.dependency import random_tree

from .backends import Backend

#: Tolerances (rtol, atol) per dtype for values of order 1 (log Z of order 10, marginals in [0, 1]).
TOLERANCE = {"float64": (1e-9, 1e-9), "float32": (2e-5, 2e-5)}


def random_batch(
    rng: np.random.Generator, lengths: list[int], padded: int, *, forbid: float = 0.0, scale: float = 2.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Scores (B, N+1, N+1), lengths (B,) and planted gold heads (B, N+1) (``-1`` on padding).

    A fraction ``forbid`` of the arcs is ``-inf``, except the planted tree's; column 0, the
    diagonal and the padding hold garbage (large values and ``-inf``) that must be ignored."""
    batch = len(lengths)
    scores = rng.normal(size=(batch, padded + 1, padded + 1)) * scale
    scores[rng.random(scores.shape) < forbid] = -np.inf
    heads = np.full((batch, padded + 1), -1)
    for b, n in enumerate(lengths):
        heads[b, : n + 1] = random_tree(rng, n)
        words = np.arange(1, n + 1)
        scores[b, heads[b, words], words] = rng.normal(size=n) * scale
        scores[b, n + 1 :, :] = rng.choice([-np.inf, 1e4], size=scores[b, n + 1 :, :].shape)
        scores[b, :, n + 1 :] = rng.choice([-np.inf, 1e4], size=scores[b, :, n + 1 :].shape)
        scores[b, :, 0] = rng.choice([-np.inf, 1e4])
        np.fill_diagonal(scores[b], 1e4)
    return scores, np.array(lengths), heads


#: Padded number of words of every batch of :func:`batches`: one shape per batch size, so jax
#: compiles each function once per batch size and dtype, not once per test.
PADDED = 5


def batches(n: int) -> list[list[int]]:
    """Lengths with ``n`` the longest: alone, and mixed in a batch of four (in two orders), all
    padded to :data:`PADDED` words (past the longest sentence for ``n < PADDED``)."""
    rng = np.random.default_rng(n)
    mixed = [n] + [int(v) for v in rng.integers(1, n + 1, size=3)]
    return [[n], mixed, mixed[::-1]]


def run(backend: Backend, scores: np.ndarray, lengths: np.ndarray, heads: np.ndarray, dtype: str):
    module = implementations.get("tree-crf", backend.name)
    s, n, h = backend.array(scores, dtype), backend.array(lengths), backend.array(heads)
    return (
        backend.numpy(module.log_partition(s, n)),
        backend.numpy(module.marginals(s, n)),
        backend.numpy(module.decode(s, n)),
        backend.numpy(module.loss(s, n, h)),
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("forbid", [0.0, 0.4])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_matches_enumeration(backend: Backend, n: int, forbid: float, dtype: str) -> None:
    rtol, atol = TOLERANCE[dtype]
    rng = np.random.default_rng([n, int(forbid * 10)])
    for lengths in batches(n):
        scores, sizes, heads = random_batch(rng, lengths, PADDED, forbid=forbid)
        scores = scores.astype(dtype).astype(np.float64)  # what the backend sees, exactly
        log_z, marginals, decoded, loss = run(backend, scores, sizes, heads, dtype)
        assert backend.dtype_name(backend.array(decoded)).startswith("int")
        for b, length in enumerate(lengths):
            own = arborescence.arcs(scores[b], length)
            answer = reference.oracle(own)
            np.testing.assert_allclose(log_z[b], answer.log_partition, rtol=rtol, atol=atol)
            np.testing.assert_allclose(
                marginals[b, : length + 1, : length + 1], answer.marginals, atol=atol * 10
            )
            outside = marginals[b].copy()
            outside[: length + 1, : length + 1] = 0
            assert not outside.any(), "marginals must be zero on padding"
            assert arborescence.tree_problem(decoded[b], length) is None
            assert (decoded[b, length + 1 :] == -1).all() and decoded[b, 0] == -1
            np.testing.assert_allclose(
                arborescence.tree_score(own, decoded[b, : length + 1]), answer.best_score, rtol=1e-12
            )
            gold = arborescence.tree_score(own, heads[b, : length + 1])
            np.testing.assert_allclose(loss[b], answer.log_partition - gold, rtol=rtol, atol=atol * 10)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_marginals_closed_forms(backend: Backend, dtype: str) -> None:
    """Each word has one head (its column sums to 1); the root has one child (row 0 sums to 1);
    so all the marginals sum to the number of words; forbidden arcs get exactly 0."""
    atol = TOLERANCE[dtype][1]
    scores, lengths, heads = random_batch(np.random.default_rng(1), [7, 3, 1, 12], 12, forbid=0.3)
    _, marginals, _, _ = run(backend, scores, lengths, heads, dtype)
    for b, n in enumerate(lengths):
        np.testing.assert_allclose(marginals[b, :, 1 : n + 1].sum(0), 1.0, atol=atol * 10)
        np.testing.assert_allclose(marginals[b, 0].sum(), 1.0, atol=atol * 10)
        assert (marginals[b][np.isneginf(arborescence.arcs(scores[b], 12))] == 0).all()
        assert (marginals[b] >= -atol).all()


def test_loss_gradient_is_marginals_minus_gold(backend: Backend) -> None:
    scores, lengths, heads = random_batch(np.random.default_rng(2), [4, 6, 2], 6, forbid=0.2)
    module = implementations.get("tree-crf", backend.name)
    inputs = {
        "scores": backend.array(scores),
        "lengths": backend.array(lengths),
        "heads": backend.array(heads),
    }

    def loss(arrays):
        return module.loss(arrays["scores"], arrays["lengths"], arrays["heads"], validate=False)

    _, grads = backend.value_and_grad(loss, inputs, ["scores"])
    _, marginals, _, _ = run(backend, scores, lengths, heads, "float64")
    gold = np.zeros_like(scores)
    for b, n in enumerate(lengths):
        gold[b, heads[b, 1 : n + 1], np.arange(1, n + 1)] = 1.0
    np.testing.assert_allclose(grads["scores"], marginals - gold, atol=1e-10)


def test_torch_equals_jax() -> None:
    pytest.importorskip("jax")
    from .backends import get

    torch_backend, jax_backend = get("torch"), get("jax")
    scores, lengths, heads = random_batch(np.random.default_rng(3), [9, 5, 1, 9, 7], 10, forbid=0.3)
    for dtype, (rtol, atol) in TOLERANCE.items():
        got_torch = run(torch_backend, scores, lengths, heads, dtype)
        got_jax = run(jax_backend, scores, lengths, heads, dtype)
        for t, j in zip(got_torch, got_jax, strict=True):
            np.testing.assert_allclose(t, j, rtol=rtol * 10, atol=atol * 10)


@pytest.mark.parametrize("scale", [50.0, 200.0])
def test_float32_is_stable_on_large_scores(backend: Backend, scale: float) -> None:
    """Scores ×50 and ×200 (very peaked distributions, whose column maxima rarely form a tree:
    the determinant form loses every digit there): float32 stays finite and matches float64 to
    ``1e-6`` relative on ``log Z`` and ``2e-4`` absolute on the marginals, and decodes alike."""
    rng = np.random.default_rng(4)
    scores, lengths, heads = random_batch(rng, [10, 4, 30, 1], 30, forbid=0.2, scale=scale)
    scores = scores.astype(np.float32).astype(np.float64)
    single = run(backend, scores, lengths, heads, "float32")
    double = run(backend, scores, lengths, heads, "float64")
    for values in single[:2]:
        assert np.isfinite(values).all()
    np.testing.assert_allclose(single[0], double[0], rtol=1e-6)
    np.testing.assert_allclose(single[1], double[1], atol=2e-4)
    np.testing.assert_array_equal(single[2], double[2])


@pytest.mark.parametrize("scale", [50.0, 200.0])
def test_large_scores_match_enumeration(backend: Backend, scale: float) -> None:
    """At scores ×50 and ×200, float64 ``log Z`` and marginals still equal enumeration to
    ``1e-12`` relative (``log Z``) and ``1e-10`` absolute (marginals)."""
    rng = np.random.default_rng(int(scale))
    scores, lengths, heads = random_batch(rng, [5, 4, 5, 3, 5, 2], 5, forbid=0.2, scale=scale)
    log_z, marginals, _, _ = run(backend, scores, lengths, heads, "float64")
    for b, length in enumerate(lengths):
        answer = reference.oracle(arborescence.arcs(scores[b], length))
        np.testing.assert_allclose(log_z[b], answer.log_partition, rtol=1e-12)
        np.testing.assert_allclose(marginals[b, : length + 1, : length + 1], answer.marginals, atol=1e-10)


@pytest.mark.parametrize("seed", range(40))
def test_decode_equals_enumeration_up_to_six_words(seed: int) -> None:
    """Many small sentences, NumPy alone: Chu-Liu-Edmonds with the root constraint finds a tree of
    the best score among every enumerated single-root tree (ties: any of them)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, reference.MAX_WORDS + 1))
    scores, _, _ = random_batch(
        rng, [n], n, forbid=float(rng.choice([0.0, 0.5])), scale=float(rng.choice([1, 5]))
    )
    if seed % 4 == 0:  # a strong pull to the root: the unconstrained optimum has several root children
        scores[0, 0, 1:] += 10.0
    own = arborescence.arcs(scores[0], n)
    heads = arborescence.best_tree(scores[0], n)
    assert arborescence.tree_problem(heads, n) is None
    assert arborescence.tree_score(own, heads) == pytest.approx(reference.oracle(own).best_score, rel=1e-12)


def _best_over_root_children(w: np.ndarray) -> float:
    """The best single-root tree's score by one unconstrained run per allowed root child (only
    that child's root arc kept): the slow, independent form of the root constraint."""
    best = -np.inf
    for child in arborescence.root_children(w):
        restricted = w.copy()
        restricted[0] = -np.inf
        restricted[0, child] = w[0, child]
        best = max(best, arborescence.tree_score(w, arborescence.chu_liu_edmonds(restricted)))
    return best


@pytest.mark.parametrize("forbid", [0.0, 0.6])
@pytest.mark.parametrize("n", [7, 20, 45])
def test_root_constraint_equals_one_run_per_root_child(n: int, forbid: float) -> None:
    """Beyond enumeration: the lowered-root-arcs run finds a single-root tree of the score of the
    best over one run per allowed root child, with the root pulling toward many children (so the
    unconstrained optimum has several), at score scales from 0.1 to 100."""
    rng = np.random.default_rng([n, int(10 * forbid)])
    several = 0
    for scale in (0.1, 2.0, 100.0):
        for _ in range(4):
            scores, _, _ = random_batch(rng, [n], n, forbid=forbid, scale=scale)
            scores[0, 0, 1:] += 3 * scale
            own = arborescence.arcs(scores[0], n)
            several += np.count_nonzero(arborescence.chu_liu_edmonds(own)[1:] == 0) > 1
            heads = arborescence.best_tree(scores[0], n)
            assert arborescence.tree_problem(heads, n) is None
            expected = _best_over_root_children(own)
            assert arborescence.tree_score(own, heads) == pytest.approx(expected, rel=1e-12, abs=1e-9)
    assert several >= 6  # the constrained path is what ran


@pytest.mark.parametrize("n", [8, 20, 30])
def test_decode_long_sentences(backend: Backend, n: int) -> None:
    """Longer sentences: a planted tree with a large margin is found exactly, even when the root
    pulls toward several children; on plain random scores the tree is valid and no single change
    of one word's head gives a better single-root tree (local optimality, an independent check)."""
    rng = np.random.default_rng(n)
    scores, lengths, heads = random_batch(rng, [n, n // 2], n)
    planted = scores.copy()
    for b, length in enumerate(lengths):
        words = np.arange(1, length + 1)
        planted[b, heads[b, words], words] += 20.0
        planted[b, 0, 1 : length + 1] += 10.0  # every root arc scores well; only one may be used
    module = implementations.get("tree-crf", backend.name)
    found = backend.numpy(module.decode(backend.array(planted), backend.array(lengths)))
    np.testing.assert_array_equal(found, heads)
    decoded = backend.numpy(module.decode(backend.array(scores), backend.array(lengths)))
    for b, length in enumerate(lengths):
        own = arborescence.arcs(scores[b], length)
        best = arborescence.tree_score(own, decoded[b, : length + 1])
        assert arborescence.tree_problem(decoded[b], length) is None
        for m in range(1, length + 1):
            for h in range(length + 1):
                changed = decoded[b, : length + 1].copy()
                changed[m] = h
                if arborescence.tree_problem(changed, length) is None:
                    assert arborescence.tree_score(own, changed) <= best + 1e-9


def test_traced_jax_matches_eager() -> None:
    """Under ``jax.jit`` the shape checks run and the kernels trace (decode excepted: it runs on
    the host)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    module = implementations.get("tree-crf", "jax")
    scores, lengths, heads = random_batch(np.random.default_rng(5), [5, 3], 6, forbid=0.2)
    s, n, h = jnp.asarray(scores), jnp.asarray(lengths), jnp.asarray(heads)
    for function, arguments in (
        (module.log_partition, (s, n)),
        (module.marginals, (s, n)),
        (module.loss, (s, n, h)),
    ):
        np.testing.assert_allclose(
            jax.jit(function)(*arguments), function(*arguments), rtol=1e-12, atol=1e-12
        )
    with pytest.raises(ValueError, match="scores must have shape"):
        jax.jit(module.log_partition)(s[0], n)


def _bad_inputs() -> list[tuple[str, dict, str]]:
    scores, lengths, heads = random_batch(np.random.default_rng(6), [3, 2], 3)
    cases: list[tuple[str, dict, str]] = [
        ("rank", {"scores": scores[0]}, r"scores must have shape \(B, N\+1, N\+1\)"),
        ("square", {"scores": scores[:, :, :3]}, r"scores must have shape \(B, N\+1, N\+1\)"),
        ("no word", {"scores": scores[:, :1, :1]}, r"scores must have shape"),
        (
            "int scores",
            {"scores": np.zeros(scores.shape, dtype=np.int64)},
            r"scores must be float32 or float64",
        ),
        ("nan", {"scores": np.where(np.eye(4, dtype=bool), np.nan, scores)}, r"scores contains NaN"),
        ("+inf", {"scores": np.where(np.eye(4, dtype=bool), np.inf, scores)}, r"scores contains \+inf"),
        (
            "lengths 0",
            {"lengths": np.array([3, 0])},
            r"lengths must satisfy 1 <= lengths\[b\] <= N = 3; lengths\[1\] = 0",
        ),
        ("lengths big", {"lengths": np.array([4, 1])}, r"lengths\[0\] = 4"),
        ("lengths shape", {"lengths": np.array([3])}, r"lengths must have shape \(B,\) = \(2,\)"),
        ("lengths float", {"lengths": np.array([3.0, 2.0])}, r"lengths must be an integer array"),
        ("heads shape", {"heads": heads[:, :3]}, r"heads must have shape \(B, N\+1\) = \(2, 4\)"),
        ("heads float", {"heads": heads.astype(np.float64)}, r"heads must be an integer array"),
    ]
    no_tree = scores.copy()
    no_tree[1, 0, :] = -np.inf
    cases.append(("infeasible", {"scores": no_tree}, r"sequence\(s\) 1 allow no single-root dependency tree"))
    gold_forbidden = scores.copy()
    gold_forbidden[0, heads[0, 2], 2] = -np.inf
    cases.append(
        (
            "gold -inf",
            {"scores": gold_forbidden},
            r"sequence\(s\) 0 have a gold tree \(heads\) with score -inf",
        )
    )
    two_roots, cycle, own, far = (heads.copy() for _ in range(4))
    two_roots[1, 1:3] = 0
    cycle[0, 1:4] = [2, 3, 1]
    own[1, 2] = 2
    far[0, 3] = 7
    cases += [
        (
            "two roots",
            {"heads": two_roots},
            r"heads\[1\] is not a single-root dependency tree: 2 words attach",
        ),
        ("cycle", {"heads": cycle}, r"heads\[0\] is not a single-root dependency tree: 0 words attach"),
        ("self", {"heads": own}, r"heads\[1\] is not a single-root dependency tree: word 2 is its own head"),
        ("range", {"heads": far}, r"heads\[0\] is not a single-root dependency tree: word 3 has head 7"),
    ]
    base = {"scores": scores, "lengths": lengths, "heads": heads}
    return [(name, base | change, message) for name, change, message in cases]


@pytest.mark.parametrize(
    ("name", "inputs", "message"), _bad_inputs(), ids=[case[0] for case in _bad_inputs()]
)
def test_bad_inputs_raise_one_line(backend: Backend, name: str, inputs: dict, message: str) -> None:
    module = implementations.get("tree-crf", backend.name)
    s, n, h = (backend.array(inputs[k]) for k in ("scores", "lengths", "heads"))
    functions = [lambda: module.loss(s, n, h)]
    if not name.startswith(("heads", "gold", "two", "cycle", "self", "range")):
        functions += [
            lambda: module.log_partition(s, n),
            lambda: module.marginals(s, n),
            lambda: module.decode(s, n),
        ]
    for function in functions:
        with pytest.raises(ValueError, match=message) as raised:
            function()
        assert "\n" not in str(raised.value)


def test_cycle_without_two_roots_is_named() -> None:
    heads = np.array([-1, 0, 3, 2])
    assert arborescence.tree_problem(heads, 3) == "words 2, 3 form a cycle"


def test_registry_and_options(backend: Backend) -> None:
    """``tree-crf`` is a dependency method: not among the chain METHODS, its own functions, no options."""
    assert "tree-crf" in implementations.DEPENDENCY_METHODS and "tree-crf" not in implementations.METHODS
    module = implementations.get("tree-crf", backend.name)
    assert module.method.functions == ("marginals", "decode", "loss", "log_partition")
    scores, lengths, _ = random_batch(np.random.default_rng(7), [2], 2)
    with pytest.raises(TypeError, match="unexpected option"):
        module.log_partition(backend.array(scores), backend.array(lengths), iterations=3)
    with pytest.raises(ValueError, match=r"valid methods: crf, .*tree-crf"):
        implementations.get("tree-crf-x", backend.name)
    assert "validate" in str(__import__("inspect").signature(module.loss))


def test_torch_struct_peer() -> None:
    """torch-struct's ``NonProjectiveDependencyCRF`` (single root) agrees on moderate scores, to
    the ``1e-5`` it adds to every arc weight: ``log Z`` within ``1e-3``, marginals within ``1e-4``."""
    torch_struct = pytest.importorskip("torch_struct")
    import torch

    from implementations import peers

    scores, lengths, _ = random_batch(np.random.default_rng(8), [5, 3, 1, 7], 7)
    scores = np.where(np.isneginf(scores), 0.0, np.minimum(scores, 5.0))  # finite garbage only
    s, n = torch.tensor(scores), torch.tensor(lengths)
    peer = torch_struct.NonProjectiveDependencyCRF(peers.to_torch_struct_dependency(s), lengths=n)
    module = implementations.get("tree-crf", "torch")
    np.testing.assert_allclose(peer.partition.numpy(), module.log_partition(s, n).numpy(), atol=1e-3)
    marginals = peers.from_torch_struct_dependency(peer.marginals)
    np.testing.assert_allclose(marginals.numpy(), module.marginals(s, n).numpy(), atol=1e-4)

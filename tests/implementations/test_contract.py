"""The contract every method honours (docs/contract.md): shapes, dtypes, padding, validation errors.

One test class, parametrised over every method in ``implementations.METHODS`` and every backend in
``implementations.BACKENDS`` (the ``backend`` fixture): inputs are built in NumPy, mutated there
for the error cases, and handed to the backend through its adapter (``backends.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import implementations
from implementations.reference import brute_force

from . import backends
from .backends import Backend
from .instances import Instance, instances, make_instance, npy, random_allowed

FUNCTIONS = ("marginals", "decode", "loss", "partial_loss", "log_partition")


def module(method: str, backend: Backend) -> Any:
    """``method`` in ``backend``, called eagerly (every validation check runs)."""
    return backend.module(method)


def call(
    mod: Any,
    fn: str,
    kw: dict[str, Any],
    tags: Any,
    allowed: Any,
    **opts: Any,
) -> Any:
    """Call one contract function with the extra argument it needs."""
    args = (kw["emissions"], kw["transitions"], kw["lengths"])
    bound = {"start": kw.get("start"), "end": kw.get("end"), **opts}
    if fn == "loss":
        return mod.loss(*args, tags, **bound)
    if fn == "partial_loss":
        return mod.partial_loss(*args, allowed, **bound)
    return getattr(mod, fn)(*args, **bound)


def every_function(
    backend: Backend, method: str, inst: Instance, allowed: np.ndarray, dtype: str, *, checked: bool = False
) -> dict[str, Any]:
    """Every function of the contract on ``inst`` (backend arrays). For jax all in one jit
    program, where the value checks are skipped; ``checked`` calls the functions eagerly instead,
    so that every check runs on these inputs too (and must pass)."""
    kw = inst.arrays(backend, dtype)
    tags, allow = inst.gold_array(backend), backend.array(allowed)
    extra = {"loss": (tags,), "partial_loss": (allow,)}
    with backend.no_grad():
        if checked:
            results = [call(module(method, backend), fn, kw, tags, allow) for fn in FUNCTIONS]
        else:
            results = backend.calls(method, kw, *[(fn, extra.get(fn, ()), {}) for fn in FUNCTIONS])
    out = dict(zip(FUNCTIONS, results, strict=True))
    out["unary"], out["pairwise"] = out.pop("marginals")
    return out


def run_all(
    backend: Backend, method: str, inst: Instance, allowed: np.ndarray, dtype: str = "float64", **kw: Any
) -> dict[str, np.ndarray]:
    """Every function of the contract on ``inst``; NumPy results in a dict."""
    return {
        key: npy(value) for key, value in every_function(backend, method, inst, allowed, dtype, **kw).items()
    }


@pytest.mark.parametrize("method", implementations.METHODS)
class TestContract:
    """Shapes, dtypes, padding and validation, for every method and every backend."""

    # ----------------------------------------------------------------- shapes, dtypes, padding

    @backends.given(inst=instances())
    def test_shapes_dtypes_and_padding(self, method: str, backend: Backend, inst: Instance) -> None:
        rng = np.random.default_rng(0)
        allowed = random_allowed(rng, inst)
        B, N, T = inst.batch, inst.length, inst.num_tags
        out = every_function(backend, method, inst, allowed, "float64")
        unary, pairwise = out["unary"], out["pairwise"]
        assert backend.is_array(unary) and backend.is_array(pairwise)
        assert unary.shape == (B, N, T) and backend.dtype_name(unary) == "float64"
        assert pairwise.shape == (B, N - 1, T, T) and backend.dtype_name(pairwise) == "float64"
        decoded = out["decode"]
        assert backend.is_array(decoded)
        assert decoded.shape == (B, N) and backend.dtype_name(decoded) in backend.decode_dtypes
        for fn in ("loss", "partial_loss", "log_partition"):
            value = out[fn]
            assert backend.is_array(value), fn
            assert value.shape == (B,) and backend.dtype_name(value) == "float64", fn
            assert np.isfinite(npy(value)).all(), fn
        valid = inst.valid()
        u, p, d = npy(unary), npy(pairwise), npy(decoded)
        assert np.isfinite(u).all() and np.isfinite(p).all()
        assert (u >= 0).all() and (p >= 0).all()
        for b in range(B):
            n = int(inst.lengths[b])
            assert (u[b, n:] == 0).all(), "unary marginals must be 0 on padding"
            assert (p[b, n - 1 :] == 0).all(), "pairwise marginals must be 0 on padding"
            assert (d[b, n:] == -1).all(), "decode must be -1 on padding"
        assert ((d >= 0) & (d < T))[valid].all()

    @backends.given(inst=instances())
    def test_padding_invariance(self, method: str, backend: Backend, inst: Instance) -> None:
        """A padded batch gives, row by row, what each sequence gives alone at N = its length."""
        allowed = random_allowed(np.random.default_rng(1), inst)
        batched = run_all(backend, method, inst, allowed)
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            alone = run_all(backend, method, inst.alone(b), allowed[b : b + 1, :n])
            np.testing.assert_allclose(batched["unary"][b, :n], alone["unary"][0], rtol=0, atol=1e-10)
            np.testing.assert_allclose(
                batched["pairwise"][b, : n - 1], alone["pairwise"][0], rtol=0, atol=1e-10
            )
            np.testing.assert_array_equal(batched["decode"][b, :n], alone["decode"][0])
            for fn in ("loss", "partial_loss", "log_partition"):
                np.testing.assert_allclose(batched[fn][b], alone[fn][0], rtol=1e-10, atol=1e-10, err_msg=fn)

    def test_shared_equals_per_position_transitions(self, method: str, backend: Backend) -> None:
        """Shared (T, T) transitions mean the same as that matrix repeated at every position."""
        rng = np.random.default_rng(2)
        inst = make_instance(rng, batch=4, length=6, num_tags=3, per_position=False, neg_inf=0.2)
        allowed = random_allowed(rng, inst)
        shared = run_all(backend, method, inst, allowed)
        expanded = run_all(backend, method, inst.with_per_position(), allowed)
        for key in shared:
            np.testing.assert_allclose(shared[key], expanded[key], rtol=1e-12, atol=1e-12, err_msg=key)

    @backends.given(inst=instances(neg_inf=(0.0, 0.2), scale=(1.0,)))
    def test_float32_close_to_float64(self, method: str, backend: Backend, inst: Instance) -> None:
        allowed = random_allowed(np.random.default_rng(3), inst)
        r64 = run_all(backend, method, inst, allowed, "float64")
        r32 = run_all(backend, method, inst, allowed, "float32")
        np.testing.assert_allclose(r32["unary"], r64["unary"], rtol=0, atol=2e-4)
        np.testing.assert_allclose(r32["pairwise"], r64["pairwise"], rtol=0, atol=2e-4)
        for fn in ("loss", "partial_loss", "log_partition"):
            np.testing.assert_allclose(r32[fn], r64[fn], rtol=1e-4, atol=1e-3, err_msg=fn)

    def test_float32_dtypes(self, method: str, backend: Backend) -> None:
        rng = np.random.default_rng(4)
        inst = make_instance(rng, batch=2, length=4, num_tags=3)
        allowed = random_allowed(rng, inst)
        out = every_function(backend, method, inst, allowed, "float32")
        assert (
            backend.dtype_name(out["unary"]) == "float32" and backend.dtype_name(out["pairwise"]) == "float32"
        )
        assert backend.dtype_name(out["decode"]) in backend.decode_dtypes
        for fn in ("loss", "partial_loss", "log_partition"):
            assert backend.dtype_name(out[fn]) == "float32", fn

    def test_loss_is_differentiable(self, method: str, backend: Backend) -> None:
        mod = module(method, backend)
        rng = np.random.default_rng(5)
        inst = make_instance(rng, batch=3, length=5, num_tags=3, neg_inf=0.2)
        allowed = random_allowed(rng, inst)
        tags, allow = inst.gold_array(backend), backend.array(allowed)
        for fn in ("loss", "partial_loss"):
            _, grads = backend.value_and_grad(
                lambda kw, fn=fn: call(mod, fn, kw, tags, allow),
                inst.arrays(backend),
                ("emissions",),
            )
            grad = grads["emissions"]
            assert np.isfinite(grad).all(), fn
            assert (grad[~inst.valid()] == 0).all(), f"{fn}: gradient leaks into padding"

    # ----------------------------------------------------------------------------- validation

    @staticmethod
    def _base() -> tuple[Instance, np.ndarray]:
        rng = np.random.default_rng(6)
        inst = make_instance(
            rng, batch=3, length=4, num_tags=3, lengths=[4, 2, 1], neg_inf=0.0, garbage=False
        )
        return inst, random_allowed(rng, inst)

    @staticmethod
    def _expect_error(
        method: str,
        backend: Backend,
        mutate: Callable[[dict[str, Any]], None],
        match: str,
        functions: tuple[str, ...] = FUNCTIONS,
        **opts: Any,
    ) -> None:
        """``mutate`` edits the keyword arguments (NumPy arrays, incl. ``tags``/``allowed``),
        which are then converted to ``backend``; every listed function must raise a ValueError
        whose message matches ``match``."""
        mod = module(method, backend)
        inst, allowed = TestContract._base()
        for fn in functions:
            kw = {**inst.scores(), "tags": inst.gold.copy(), "allowed": allowed.copy()}
            mutate(kw)
            kw = backend.arrays(kw)
            with pytest.raises(ValueError, match=match):
                call(mod, fn, kw, kw.pop("tags"), kw.pop("allowed"), **opts)

    BAD_SCORES: ClassVar[dict[str, tuple[Callable[[dict[str, Any]], None], str]]] = {
        "emissions rank 2": (lambda k: k.update(emissions=k["emissions"][0]), "emissions"),
        "emissions rank 4": (lambda k: k.update(emissions=k["emissions"][None]), "emissions"),
        "emissions integer": (
            lambda k: k.update(emissions=np.zeros(k["emissions"].shape, dtype=np.int64)),
            "emissions",
        ),
        "emissions empty N": (lambda k: k.update(emissions=k["emissions"][:, :0]), "emissions"),
        "emissions NaN": (lambda k: k["emissions"].__setitem__((0, 1, 2), math.nan), "emissions"),
        "emissions NaN in padding": (
            lambda k: k["emissions"].__setitem__((2, 3, 0), math.nan),
            "emissions",
        ),
        "emissions +inf": (lambda k: k["emissions"].__setitem__((1, 0, 1), math.inf), "emissions"),
        "transitions rank 3": (
            lambda k: k.update(transitions=k["transitions"][0]),
            "transitions",
        ),
        "transitions rank 2 wrong T": (
            lambda k: k.update(transitions=np.zeros((4, 4))),
            "transitions",
        ),
        "transitions wrong N": (
            lambda k: k.update(transitions=k["transitions"][:, :2]),
            "transitions",
        ),
        "transitions wrong B": (
            lambda k: k.update(transitions=k["transitions"][:2]),
            "transitions",
        ),
        "transitions integer": (
            lambda k: k.update(transitions=np.zeros((3, 3), dtype=np.int64)),
            "transitions",
        ),
        "transitions NaN": (
            lambda k: k["transitions"].__setitem__((0, 0, 1, 1), math.nan),
            "transitions",
        ),
        "transitions +inf": (
            lambda k: k["transitions"].__setitem__((1, 0, 1, 1), math.inf),
            "transitions",
        ),
        "start wrong T": (lambda k: k.update(start=np.zeros(4)), "start"),
        "start rank 2": (lambda k: k.update(start=np.zeros((1, 3))), "start"),
        "start NaN": (lambda k: k["start"].__setitem__(0, math.nan), "start"),
        "start +inf": (lambda k: k["start"].__setitem__(2, math.inf), "start"),
        "start integer": (lambda k: k.update(start=np.zeros(3, dtype=np.int64)), "start"),
        "end wrong T": (lambda k: k.update(end=np.zeros(2)), "end"),
        "end NaN": (lambda k: k["end"].__setitem__(1, math.nan), "end"),
        "end +inf": (lambda k: k["end"].__setitem__(1, math.inf), "end"),
        "lengths zero": (lambda k: k["lengths"].__setitem__(1, 0), "lengths"),
        "lengths negative": (lambda k: k["lengths"].__setitem__(2, -1), "lengths"),
        "lengths above N": (lambda k: k["lengths"].__setitem__(0, 5), "lengths"),
        "lengths float": (lambda k: k.update(lengths=k["lengths"].astype(np.float64)), "lengths"),
        "lengths wrong B": (lambda k: k.update(lengths=k["lengths"][:2]), "lengths"),
        "lengths rank 2": (lambda k: k.update(lengths=k["lengths"][:, None]), "lengths"),
        "no valid sequence (emissions)": (
            lambda k: k["emissions"][1, 1].fill(-math.inf),
            "sequence",
        ),
        "no valid sequence (transitions)": (
            lambda k: k["transitions"][0, 2].fill(-math.inf),
            "sequence",
        ),
        "no valid sequence (start)": (lambda k: k["start"].fill(-math.inf), "sequence"),
    }

    @pytest.mark.parametrize("case", sorted(BAD_SCORES))
    def test_bad_scores_raise(self, method: str, backend: Backend, case: str) -> None:
        mutate, match = self.BAD_SCORES[case]
        self._expect_error(method, backend, mutate, match)

    BAD_TAGS: ClassVar[dict[str, Callable[[dict[str, Any]], None]]] = {
        "tag = T inside": lambda k: k["tags"].__setitem__((0, 3), 3),
        "tag = -1 inside": lambda k: k["tags"].__setitem__((1, 1), -1),
        "tags wrong shape": lambda k: k.update(tags=k["tags"][:, :3]),
        "tags float": lambda k: k.update(tags=k["tags"].astype(np.float64)),
    }

    @pytest.mark.parametrize("case", sorted(BAD_TAGS))
    def test_bad_tags_raise(self, method: str, backend: Backend, case: str) -> None:
        self._expect_error(method, backend, self.BAD_TAGS[case], "tags", functions=("loss",))

    def test_gold_with_neg_inf_score_raises(self, method: str, backend: Backend) -> None:
        def forbid_gold_transition(k: dict[str, Any]) -> None:
            a, b = int(k["tags"][0, 1]), int(k["tags"][0, 2])
            k["transitions"][0, 1, a, b] = -math.inf

        def forbid_gold_emission(k: dict[str, Any]) -> None:
            k["emissions"][1, 1, int(k["tags"][1, 1])] = -math.inf

        def forbid_gold_end(k: dict[str, Any]) -> None:
            k["end"][int(k["tags"][2, 0])] = -math.inf
            k["end"][(int(k["tags"][2, 0]) + 1) % 3] = 0.0  # other sequences stay valid
            k["end"][(int(k["tags"][2, 0]) + 2) % 3] = 0.0

        for mutate in (forbid_gold_transition, forbid_gold_emission, forbid_gold_end):
            self._expect_error(method, backend, mutate, "sequence|tags", functions=("loss",))

    def test_tags_padding_is_ignored(self, method: str, backend: Backend) -> None:
        mod = module(method, backend)  # the gold-tag checks must ignore the padding too
        inst, _ = self._base()
        kw = inst.arrays(backend)
        ref = mod.loss(
            kw["emissions"],
            kw["transitions"],
            kw["lengths"],
            inst.gold_array(backend),
            start=kw["start"],
            end=kw["end"],
        )
        tags = inst.gold.copy()
        tags[1, 2:] = 1000
        tags[2, 1:] = -7
        got = mod.loss(
            kw["emissions"],
            kw["transitions"],
            kw["lengths"],
            backend.array(tags),
            start=kw["start"],
            end=kw["end"],
        )
        assert backend.dtype_name(got) == backend.dtype_name(ref)
        np.testing.assert_array_equal(npy(got), npy(ref))

    BAD_ALLOWED: ClassVar[dict[str, tuple[Callable[[dict[str, Any]], None], str]]] = {
        "allowed wrong shape": (lambda k: k.update(allowed=k["allowed"][:, :, :2]), "allowed"),
        "allowed rank 2": (lambda k: k.update(allowed=k["allowed"][0]), "allowed"),
        "allowed integer": (lambda k: k.update(allowed=k["allowed"].astype(np.int64)), "allowed"),
        "allowed forbids a whole position": (
            lambda k: k["allowed"][0, 2].fill(False),
            "allowed|sequence",
        ),
        "allowed leaves no valid sequence": (
            # sequence 1 (length 2): only tag 0 then tag 1 allowed, and that transition forbidden
            lambda k: (
                k["allowed"][1].fill(False),
                k["allowed"].__setitem__((1, 0, 0), True),
                k["allowed"].__setitem__((1, 1, 1), True),
                k["transitions"].__setitem__((1, 0, 0, 1), -math.inf),
                k["tags"].__setitem__((1, slice(0, 2)), [1, 1]),
            ),
            "allowed|sequence",
        ),
    }

    @pytest.mark.parametrize("case", sorted(BAD_ALLOWED))
    def test_bad_allowed_raises(self, method: str, backend: Backend, case: str) -> None:
        mutate, match = self.BAD_ALLOWED[case]
        self._expect_error(method, backend, mutate, match, functions=("partial_loss",))

    def test_allowed_padding_is_ignored(self, method: str, backend: Backend) -> None:
        mod = module(method, backend)  # the feasibility check must ignore the padding too
        inst, allowed = self._base()
        kw = inst.arrays(backend)
        args = (kw["emissions"], kw["transitions"], kw["lengths"])
        ref = mod.partial_loss(*args, backend.array(allowed), start=kw["start"], end=kw["end"])
        allowed = allowed.copy()
        allowed[1, 2:] = False
        allowed[2, 1:] = False
        got = mod.partial_loss(*args, backend.array(allowed), start=kw["start"], end=kw["end"])
        assert backend.dtype_name(got) == backend.dtype_name(ref)
        np.testing.assert_array_equal(npy(got), npy(ref))

    def test_neg_inf_in_padding_is_fine(self, method: str, backend: Backend) -> None:
        inst, allowed = self._base()
        inst.emissions[1, 2:] = -np.inf
        inst.emissions[2, 1:] = -np.inf
        inst.transitions[2] = -np.inf
        inst.transitions[1, 1:] = -np.inf
        out = run_all(backend, method, inst, allowed, checked=True)  # every check runs, and passes
        for key, value in out.items():
            assert np.isfinite(value).all(), key

    def test_validate_false_skips_checks(self, method: str, backend: Backend) -> None:
        """With ``validate=False`` a NaN score is not reported (it just propagates)."""
        mod = module(method, backend)
        inst, allowed = self._base()
        scores = inst.scores()
        scores["emissions"][0, 1, 1] = math.nan
        kw = backend.arrays(scores)
        tags, allow = inst.gold_array(backend), backend.array(allowed)
        with pytest.raises(ValueError):
            call(mod, "log_partition", kw, tags, allow)
        call(mod, "log_partition", kw, tags, allow, validate=False)
        call(mod, "marginals", kw, tags, allow, validate=False)


# --------------------------------------------------------------------------- method options

BAD_OPTIONS: list[tuple[str, dict[str, Any], str, tuple[str, ...]]] = [
    ("bcrf", {"iterations": 0}, "iterations", FUNCTIONS),
    ("bcrf", {"iterations": -3}, "iterations", FUNCTIONS),
    ("bcrf", {"iterations": 2.5}, "iterations", FUNCTIONS),
    ("bcrf", {"temperature": 0.0}, "temperature", FUNCTIONS),
    ("bcrf", {"temperature": -1.0}, "temperature", FUNCTIONS),
    ("bcrf", {"order": "odd-odd"}, "order", FUNCTIONS),
    ("bcrf", {"gradient": "backprop"}, "gradient", ("loss", "partial_loss")),
    ("meanfield", {"iterations": 0}, "iterations", FUNCTIONS),
    ("meanfield", {"iterations": 1.5}, "iterations", FUNCTIONS),
    ("meanfield", {"init": "random"}, "init", FUNCTIONS),
    ("meanfield", {"penalty": math.nan}, "penalty", FUNCTIONS),
    ("meanfield", {"penalty": -math.inf}, "penalty", FUNCTIONS),
]


@pytest.mark.parametrize(("method", "opts", "match", "functions"), BAD_OPTIONS)
def test_bad_options_raise(
    method: str, backend: Backend, opts: dict[str, Any], match: str, functions: tuple[str, ...]
) -> None:
    TestContract._expect_error(method, backend, lambda k: None, match, functions=functions, **opts)


@pytest.mark.parametrize(
    ("method", "opts"),
    [
        ("bcrf", {"iterations": 0}),
        ("bcrf", {"temperature": -1.0}),
        ("bcrf", {"order": "odd-odd"}),
        ("meanfield", {"init": "random"}),
        ("meanfield", {"iterations": 0}),
    ],
)
def test_bad_options_raise_in_solve(method: str, backend: Backend, opts: dict[str, Any]) -> None:
    inst, _ = TestContract._base()
    kw = inst.arrays(backend)
    with pytest.raises(ValueError, match=next(iter(opts))):
        module(method, backend).solve(
            kw["emissions"], kw["transitions"], kw["lengths"], start=kw["start"], end=kw["end"], **opts
        )


def test_get_rejects_unknown_method_and_backend() -> None:
    with pytest.raises(ValueError, match="crf-scan") as err:
        implementations.get("not-a-method")
    for name in implementations.METHODS:
        assert name in str(err.value)
    with pytest.raises(ValueError, match="torch"):
        implementations.get("crf", backend="tensorflow")


def test_get_returns_the_contract(backend: Backend) -> None:
    for name in implementations.METHODS:
        mod = implementations.get(name, backend=backend.name)
        for fn in FUNCTIONS:
            assert callable(getattr(mod, fn)), (name, fn)
    assert callable(implementations.get("bcrf", backend=backend.name).solve)
    assert callable(implementations.get("meanfield", backend=backend.name).solve)


def test_get_defaults_to_torch() -> None:
    assert implementations.get("crf") is implementations.get("crf", backend="torch")


def test_brute_force_oracle_matches_definition() -> None:
    """The brute-force oracle's vectorised scores equal the per-path definition (self-check)."""
    rng = np.random.default_rng(7)
    inst = make_instance(rng, batch=3, length=4, num_tags=3, neg_inf=0.3)
    for b in range(inst.batch):
        enum = brute_force.enumerate_scores(**inst.seq(b))
        for path, score in zip(enum.paths, enum.scores, strict=True):
            assert brute_force.path_score(path, **inst.seq(b)) == pytest.approx(score, abs=1e-12) or (
                score == -np.inf and brute_force.path_score(path, **inst.seq(b)) == -np.inf
            )


@given(st.data())
def test_instances_have_a_valid_gold_path(data: st.DataObject) -> None:
    """Generator self-check: the planted gold path is valid in every sequence."""
    inst = data.draw(instances())
    for b in range(inst.batch):
        n = int(inst.lengths[b])
        assert np.isfinite(brute_force.path_score(inst.gold[b, :n], **inst.seq(b)))

"""The contract every method honours (docs/API.md): shapes, dtypes, padding, validation errors.

One test class, parametrised over every method in ``implementations.METHODS``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import implementations
from implementations.reference import brute_force

from .instances import Instance, instances, make_instance, npy, random_allowed

FUNCTIONS = ("marginals", "decode", "loss", "partial_loss", "log_partition")


def module(method: str) -> Any:
    return implementations.get(method, backend="torch")


def call(
    mod: Any,
    fn: str,
    kw: dict[str, Any],
    tags: torch.Tensor,
    allowed: torch.Tensor,
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


def run_all(mod: Any, inst: Instance, allowed: np.ndarray, dtype: torch.dtype = torch.float64):
    """Every function of the contract on ``inst``; NumPy results in a dict."""
    kw = inst.torch(dtype)
    tags = inst.gold_tensor()
    allow = torch.tensor(allowed)
    out = {}
    with torch.no_grad():
        unary, pairwise = call(mod, "marginals", kw, tags, allow)
        out["unary"], out["pairwise"] = npy(unary), npy(pairwise)
        for fn in ("decode", "loss", "partial_loss", "log_partition"):
            out[fn] = npy(call(mod, fn, kw, tags, allow))
    return out


@pytest.mark.parametrize("method", implementations.METHODS)
class TestContract:
    """Shapes, dtypes, padding and validation, for every method."""

    # ----------------------------------------------------------------- shapes, dtypes, padding

    @given(inst=instances())
    def test_shapes_dtypes_and_padding(self, method: str, inst: Instance) -> None:
        mod = module(method)
        rng = np.random.default_rng(0)
        allowed = random_allowed(rng, inst)
        kw = inst.torch()
        tags, allow = inst.gold_tensor(), torch.tensor(allowed)
        B, N, T = inst.batch, inst.length, inst.num_tags
        unary, pairwise = call(mod, "marginals", kw, tags, allow)
        assert unary.shape == (B, N, T) and unary.dtype == torch.float64
        assert pairwise.shape == (B, N - 1, T, T) and pairwise.dtype == torch.float64
        decoded = call(mod, "decode", kw, tags, allow)
        assert isinstance(decoded, torch.Tensor)
        assert decoded.shape == (B, N) and decoded.dtype == torch.int64
        for fn in ("loss", "partial_loss", "log_partition"):
            value = call(mod, fn, kw, tags, allow)
            assert value.shape == (B,) and value.dtype == torch.float64, fn
            assert torch.isfinite(value).all(), fn
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

    @given(inst=instances())
    def test_padding_invariance(self, method: str, inst: Instance) -> None:
        """A padded batch gives, row by row, what each sequence gives alone at N = its length."""
        mod = module(method)
        allowed = random_allowed(np.random.default_rng(1), inst)
        batched = run_all(mod, inst, allowed)
        for b in range(inst.batch):
            n = int(inst.lengths[b])
            alone = run_all(mod, inst.alone(b), allowed[b : b + 1, :n])
            np.testing.assert_allclose(batched["unary"][b, :n], alone["unary"][0], rtol=0, atol=1e-10)
            np.testing.assert_allclose(
                batched["pairwise"][b, : n - 1], alone["pairwise"][0], rtol=0, atol=1e-10
            )
            np.testing.assert_array_equal(batched["decode"][b, :n], alone["decode"][0])
            for fn in ("loss", "partial_loss", "log_partition"):
                np.testing.assert_allclose(batched[fn][b], alone[fn][0], rtol=1e-10, atol=1e-10, err_msg=fn)

    def test_shared_equals_per_position_transitions(self, method: str) -> None:
        """Shared (T, T) transitions mean the same as that matrix repeated at every position."""
        mod = module(method)
        rng = np.random.default_rng(2)
        inst = make_instance(rng, batch=4, length=6, num_tags=3, per_position=False, neg_inf=0.2)
        allowed = random_allowed(rng, inst)
        shared = run_all(mod, inst, allowed)
        expanded = run_all(mod, inst.with_per_position(), allowed)
        for key in shared:
            np.testing.assert_allclose(shared[key], expanded[key], rtol=1e-12, atol=1e-12, err_msg=key)

    @given(inst=instances(neg_inf=(0.0, 0.2), scale=(1.0,)))
    def test_float32_close_to_float64(self, method: str, inst: Instance) -> None:
        mod = module(method)
        allowed = random_allowed(np.random.default_rng(3), inst)
        r64 = run_all(mod, inst, allowed, torch.float64)
        r32 = run_all(mod, inst, allowed, torch.float32)
        np.testing.assert_allclose(r32["unary"], r64["unary"], rtol=0, atol=2e-4)
        np.testing.assert_allclose(r32["pairwise"], r64["pairwise"], rtol=0, atol=2e-4)
        for fn in ("loss", "partial_loss", "log_partition"):
            np.testing.assert_allclose(r32[fn], r64[fn], rtol=1e-4, atol=1e-3, err_msg=fn)

    def test_float32_dtypes(self, method: str) -> None:
        mod = module(method)
        rng = np.random.default_rng(4)
        inst = make_instance(rng, batch=2, length=4, num_tags=3)
        allowed = random_allowed(rng, inst)
        kw = inst.torch(torch.float32)
        tags, allow = inst.gold_tensor(), torch.tensor(allowed)
        unary, pairwise = call(mod, "marginals", kw, tags, allow)
        assert unary.dtype == torch.float32 and pairwise.dtype == torch.float32
        assert call(mod, "decode", kw, tags, allow).dtype == torch.int64
        for fn in ("loss", "partial_loss", "log_partition"):
            assert call(mod, fn, kw, tags, allow).dtype == torch.float32, fn

    def test_loss_is_differentiable(self, method: str) -> None:
        mod = module(method)
        rng = np.random.default_rng(5)
        inst = make_instance(rng, batch=3, length=5, num_tags=3, neg_inf=0.2)
        allowed = random_allowed(rng, inst)
        for fn in ("loss", "partial_loss"):
            kw = inst.torch(grad=True)
            value = call(mod, fn, kw, inst.gold_tensor(), torch.tensor(allowed))
            value.sum().backward()
            grad = kw["emissions"].grad
            assert grad is not None and torch.isfinite(grad).all(), fn
            valid = torch.tensor(inst.valid())
            assert (grad[~valid] == 0).all(), f"{fn}: gradient leaks into padding"

    # ----------------------------------------------------------------------------- validation

    @staticmethod
    def _base() -> tuple[Instance, np.ndarray]:
        rng = np.random.default_rng(6)
        inst = make_instance(
            rng, batch=3, length=4, num_tags=3, lengths=[4, 2, 1], neg_inf=0.0, garbage=False
        )
        return inst, random_allowed(rng, inst)

    def _expect_error(
        self,
        method: str,
        mutate: Callable[[dict[str, Any]], None],
        match: str,
        functions: tuple[str, ...] = FUNCTIONS,
        **opts: Any,
    ) -> None:
        """``mutate`` edits the keyword arguments (incl. ``tags``/``allowed``); every listed
        function must raise a ValueError whose message matches ``match``."""
        mod = module(method)
        inst, allowed = self._base()
        for fn in functions:
            kw = inst.torch()
            kw["tags"] = inst.gold_tensor()
            kw["allowed"] = torch.tensor(allowed)
            mutate(kw)
            with pytest.raises(ValueError, match=match):
                call(mod, fn, kw, kw.pop("tags"), kw.pop("allowed"), **opts)

    BAD_SCORES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
        "emissions rank 2": (lambda k: k.update(emissions=k["emissions"][0]), "emissions"),
        "emissions rank 4": (lambda k: k.update(emissions=k["emissions"][None]), "emissions"),
        "emissions integer": (
            lambda k: k.update(emissions=torch.zeros(k["emissions"].shape, dtype=torch.int64)),
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
            lambda k: k.update(transitions=torch.zeros(4, 4, dtype=torch.float64)),
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
            lambda k: k.update(transitions=torch.zeros(3, 3, dtype=torch.int64)),
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
        "start wrong T": (lambda k: k.update(start=torch.zeros(4, dtype=torch.float64)), "start"),
        "start rank 2": (lambda k: k.update(start=torch.zeros(1, 3, dtype=torch.float64)), "start"),
        "start NaN": (lambda k: k["start"].__setitem__(0, math.nan), "start"),
        "start +inf": (lambda k: k["start"].__setitem__(2, math.inf), "start"),
        "start integer": (lambda k: k.update(start=torch.zeros(3, dtype=torch.int64)), "start"),
        "end wrong T": (lambda k: k.update(end=torch.zeros(2, dtype=torch.float64)), "end"),
        "end NaN": (lambda k: k["end"].__setitem__(1, math.nan), "end"),
        "end +inf": (lambda k: k["end"].__setitem__(1, math.inf), "end"),
        "lengths zero": (lambda k: k["lengths"].__setitem__(1, 0), "lengths"),
        "lengths negative": (lambda k: k["lengths"].__setitem__(2, -1), "lengths"),
        "lengths above N": (lambda k: k["lengths"].__setitem__(0, 5), "lengths"),
        "lengths float": (lambda k: k.update(lengths=k["lengths"].double()), "lengths"),
        "lengths wrong B": (lambda k: k.update(lengths=k["lengths"][:2]), "lengths"),
        "lengths rank 2": (lambda k: k.update(lengths=k["lengths"][:, None]), "lengths"),
        "no valid sequence (emissions)": (
            lambda k: k["emissions"][1, 1].fill_(-math.inf),
            "sequence",
        ),
        "no valid sequence (transitions)": (
            lambda k: k["transitions"][0, 2].fill_(-math.inf),
            "sequence",
        ),
        "no valid sequence (start)": (lambda k: k["start"].fill_(-math.inf), "sequence"),
    }

    @pytest.mark.parametrize("case", sorted(BAD_SCORES))
    def test_bad_scores_raise(self, method: str, case: str) -> None:
        mutate, match = self.BAD_SCORES[case]
        self._expect_error(method, mutate, match)

    BAD_TAGS: dict[str, Callable[[dict[str, Any]], None]] = {
        "tag = T inside": lambda k: k["tags"].__setitem__((0, 3), 3),
        "tag = -1 inside": lambda k: k["tags"].__setitem__((1, 1), -1),
        "tags wrong shape": lambda k: k.update(tags=k["tags"][:, :3]),
        "tags float": lambda k: k.update(tags=k["tags"].double()),
    }

    @pytest.mark.parametrize("case", sorted(BAD_TAGS))
    def test_bad_tags_raise(self, method: str, case: str) -> None:
        self._expect_error(method, self.BAD_TAGS[case], "tags", functions=("loss",))

    def test_gold_with_neg_inf_score_raises(self, method: str) -> None:
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
            self._expect_error(method, mutate, "sequence|tags", functions=("loss",))

    def test_tags_padding_is_ignored(self, method: str) -> None:
        mod = module(method)
        inst, _ = self._base()
        kw = inst.torch()
        tags = inst.gold_tensor()
        ref = mod.loss(
            kw["emissions"], kw["transitions"], kw["lengths"], tags, start=kw["start"], end=kw["end"]
        )
        tags = tags.clone()
        tags[1, 2:] = 1000
        tags[2, 1:] = -7
        got = mod.loss(
            kw["emissions"], kw["transitions"], kw["lengths"], tags, start=kw["start"], end=kw["end"]
        )
        torch.testing.assert_close(got, ref, rtol=0, atol=0)

    BAD_ALLOWED: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
        "allowed wrong shape": (lambda k: k.update(allowed=k["allowed"][:, :, :2]), "allowed"),
        "allowed rank 2": (lambda k: k.update(allowed=k["allowed"][0]), "allowed"),
        "allowed integer": (lambda k: k.update(allowed=k["allowed"].long()), "allowed"),
        "allowed forbids a whole position": (
            lambda k: k["allowed"][0, 2].fill_(False),
            "allowed|sequence",
        ),
        "allowed leaves no valid sequence": (
            # sequence 1 (length 2): only tag 0 then tag 1 allowed, and that transition forbidden
            lambda k: (
                k["allowed"][1].fill_(False),
                k["allowed"][1, 0, 0].fill_(True),
                k["allowed"][1, 1, 1].fill_(True),
                k["transitions"][1, 0, 0, 1].fill_(-math.inf),
                k["tags"][1, :2].copy_(torch.tensor([1, 1])),
            ),
            "allowed|sequence",
        ),
    }

    @pytest.mark.parametrize("case", sorted(BAD_ALLOWED))
    def test_bad_allowed_raises(self, method: str, case: str) -> None:
        mutate, match = self.BAD_ALLOWED[case]
        self._expect_error(method, mutate, match, functions=("partial_loss",))

    def test_allowed_padding_is_ignored(self, method: str) -> None:
        mod = module(method)
        inst, allowed = self._base()
        kw = inst.torch()
        args = (kw["emissions"], kw["transitions"], kw["lengths"])
        ref = mod.partial_loss(*args, torch.tensor(allowed), start=kw["start"], end=kw["end"])
        allowed = allowed.copy()
        allowed[1, 2:] = False
        allowed[2, 1:] = False
        got = mod.partial_loss(*args, torch.tensor(allowed), start=kw["start"], end=kw["end"])
        torch.testing.assert_close(got, ref, rtol=0, atol=0)

    def test_neg_inf_in_padding_is_fine(self, method: str) -> None:
        mod = module(method)
        inst, allowed = self._base()
        inst.emissions[1, 2:] = -np.inf
        inst.emissions[2, 1:] = -np.inf
        inst.transitions[2] = -np.inf
        inst.transitions[1, 1:] = -np.inf
        out = run_all(mod, inst, allowed)
        for key, value in out.items():
            assert np.isfinite(value).all(), key

    def test_validate_false_skips_checks(self, method: str) -> None:
        """With ``validate=False`` a NaN score is not reported (it just propagates)."""
        mod = module(method)
        inst, allowed = self._base()
        kw = inst.torch()
        kw["emissions"][0, 1, 1] = math.nan
        with pytest.raises(ValueError):
            call(mod, "log_partition", kw, inst.gold_tensor(), torch.tensor(allowed))
        call(mod, "log_partition", kw, inst.gold_tensor(), torch.tensor(allowed), validate=False)
        call(mod, "marginals", kw, inst.gold_tensor(), torch.tensor(allowed), validate=False)


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
def test_bad_options_raise(method: str, opts: dict[str, Any], match: str, functions: tuple[str, ...]) -> None:
    TestContract()._expect_error(method, lambda k: None, match, functions=functions, **opts)


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
def test_bad_options_raise_in_solve(method: str, opts: dict[str, Any]) -> None:
    inst, _ = TestContract._base()
    kw = inst.torch()
    with pytest.raises(ValueError, match=next(iter(opts))):
        module(method).solve(
            kw["emissions"], kw["transitions"], kw["lengths"], start=kw["start"], end=kw["end"], **opts
        )


def test_get_rejects_unknown_method_and_backend() -> None:
    with pytest.raises(ValueError, match="crf-scan") as err:
        implementations.get("not-a-method")
    for name in implementations.METHODS:
        assert name in str(err.value)
    with pytest.raises(ValueError, match="torch"):
        implementations.get("crf", backend="tensorflow")


def test_get_returns_the_contract() -> None:
    for name in implementations.METHODS:
        mod = implementations.get(name, backend="torch")
        for fn in FUNCTIONS:
            assert callable(getattr(mod, fn)), (name, fn)
    assert callable(implementations.get("bcrf").solve)
    assert callable(implementations.get("meanfield").solve)


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

"""The engine's named uses of the methods (``crfbench.uses``) and the agreement report's settings
(``crfbench.agreement.SETTINGS``) refer only to what the registry has."""

from __future__ import annotations

import pytest

from crfbench import uses
from crfbench.agreement import ORACLE_NAMES, SETTINGS
from implementations import registry


@pytest.mark.parametrize("use", [*uses.LOSSES.values(), *uses.DECODERS.values()], ids=lambda use: use.name)
def test_every_use_is_a_valid_contract_call(use: uses.Use) -> None:
    method = registry.method(use.method)
    assert use.function in method.functions
    given = {name: value for name, value in use.options.items() if value is not None}
    method.resolve(use.function, given)  # raises on an unknown or invalid option


def test_losses_name_a_decoder_of_their_own() -> None:
    for loss in uses.LOSSES.values():
        assert loss.function in ("loss", "partial_loss")
        assert loss.natural_decoder in uses.DECODERS
    assert all(decoder.function == "decode" for decoder in uses.DECODERS.values())


def test_iterative_decoders_are_named_by_their_iterations() -> None:
    for name, decoder in uses.DECODERS.items():
        if "iterations" in decoder.options:
            assert name == f"{decoder.method}-{decoder.options['iterations']}"
    assert uses.decoders_of("bcrf") == ("bcrf-5", "bcrf-10")
    assert uses.decoders_of("bethe") == ()


def test_agreement_covers_every_method_once() -> None:
    assert set(SETTINGS) == set(registry.REGISTRY) | set(registry.DEPENDENCY_REGISTRY)
    assert len(ORACLE_NAMES) == len({setting.oracle_name for setting in SETTINGS.values()})
    for name, setting in SETTINGS.items():
        registry.method(name).resolve("marginals", {k: v for k, v in setting.options.items()})

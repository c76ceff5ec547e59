"""The converters to pytorch-crf and torch-struct: those libraries, given our scores, must
compute our log Z and NLL (they serve as independent oracles; skipped if not installed)."""

from __future__ import annotations

import pytest
import torch

import implementations
from implementations import peers


def _instance(seed: int, per_position: bool = False):
    generator = torch.Generator().manual_seed(seed)
    batch, length, num_tags = 5, 7, 4
    emissions = torch.randn(batch, length, num_tags, generator=generator, dtype=torch.float64)
    shape = (batch, length - 1, num_tags, num_tags) if per_position else (num_tags, num_tags)
    transitions = torch.randn(*shape, generator=generator, dtype=torch.float64)
    start, end = (torch.randn(num_tags, generator=generator, dtype=torch.float64) for _ in range(2))
    lengths = torch.tensor([7, 2, 5, 3, 6])
    tags = torch.randint(0, num_tags, (batch, length), generator=generator)
    return emissions, transitions, lengths, tags, start, end


@pytest.mark.parametrize("seed", range(3))
def test_pytorch_crf_computes_our_nll(seed):
    pytest.importorskip("torchcrf")
    emissions, transitions, lengths, tags, start, end = _instance(seed)
    crf = peers.to_pytorch_crf(transitions, start, end)
    theirs = -crf(emissions, tags, mask=peers.pytorch_crf_mask(lengths, emissions.shape[1]), reduction="none")
    ours = implementations.get("crf").loss(emissions, transitions, lengths, tags, start=start, end=end)
    torch.testing.assert_close(theirs.detach(), ours, rtol=1e-12, atol=1e-12)


def test_pytorch_crf_rejects_per_position_transitions():
    pytest.importorskip("torchcrf")
    _, transitions, *_ = _instance(0, per_position=True)
    with pytest.raises(ValueError, match="shared"):
        peers.to_pytorch_crf(transitions)


@pytest.mark.parametrize("per_position", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_torch_struct_computes_our_log_partition_and_nll(seed, per_position):
    torch_struct = pytest.importorskip("torch_struct")
    emissions, transitions, lengths, tags, start, end = _instance(seed, per_position)
    potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
    dist = torch_struct.LinearChainCRF(potentials, lengths=lengths)
    crf = implementations.get("crf")
    log_z = crf.log_partition(emissions, transitions, lengths, start=start, end=end)
    torch.testing.assert_close(dist.partition, log_z)
    parts = torch_struct.LinearChainCRF.struct.to_parts(tags, emissions.shape[-1], lengths=lengths)
    parts = parts.to(emissions.dtype)
    ours = crf.loss(emissions, transitions, lengths, tags, start=start, end=end)
    torch.testing.assert_close(-dist.log_prob(parts), ours)


def test_torch_struct_rejects_length_one():
    emissions, transitions, lengths, *_ = _instance(0)
    with pytest.raises(ValueError, match="length"):
        peers.to_torch_struct(emissions, transitions, torch.ones_like(lengths))


@pytest.mark.parametrize("per_position", [False, True])
def test_torch_struct_marginals_and_argmax_are_ours(per_position):
    torch_struct = pytest.importorskip("torch_struct")
    emissions, transitions, lengths, _, start, end = _instance(3, per_position)
    potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
    dist = torch_struct.LinearChainCRF(potentials, lengths=lengths)
    crf = implementations.get("crf")
    _, pairwise = crf.marginals(emissions, transitions, lengths, start=start, end=end)
    torch.testing.assert_close(dist.marginals.transpose(-1, -2), pairwise)
    tags = crf.decode(emissions, transitions, lengths, start=start, end=end)
    edges = dist.argmax.transpose(-1, -2)  # [b, n, prev, cur] indicator of the best path
    previous, current = edges.sum(-1).argmax(-1), edges.sum(-2).argmax(-1)
    theirs = torch.cat([previous[:, :1], current], dim=1)
    inside = torch.arange(tags.shape[1]) < lengths[:, None]
    assert torch.equal(theirs[inside], tags[inside])


def test_pytorch_crf_viterbi_is_ours():
    pytest.importorskip("torchcrf")
    emissions, transitions, lengths, _, start, end = _instance(4)
    crf = peers.to_pytorch_crf(transitions, start, end)
    theirs = crf.decode(emissions, mask=peers.pytorch_crf_mask(lengths, emissions.shape[1]))
    ours = implementations.get("crf").decode(emissions, transitions, lengths, start=start, end=end)
    for b, path in enumerate(theirs):
        assert ours[b, : len(path)].tolist() == path


def test_from_pytorch_crf_round_trip():
    pytest.importorskip("torchcrf")
    _emissions, transitions, _lengths, _tags, start, end = _instance(5)
    back = peers.from_pytorch_crf(peers.to_pytorch_crf(transitions, start, end))
    for got, expected in zip(back, (transitions, start, end), strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("per_position", [False, True])
def test_from_torch_struct_defines_the_same_distribution(per_position):
    torch_struct = pytest.importorskip("torch_struct")
    emissions, transitions, lengths, tags, start, end = _instance(6, per_position)
    potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
    dist = torch_struct.LinearChainCRF(potentials, lengths=lengths)
    zero_emissions, edge_transitions = peers.from_torch_struct(potentials)
    crf = implementations.get("crf")
    torch.testing.assert_close(crf.log_partition(zero_emissions, edge_transitions, lengths), dist.partition)
    ours = crf.loss(zero_emissions, edge_transitions, lengths, tags)
    expected = crf.loss(emissions, transitions, lengths, tags, start=start, end=end)
    torch.testing.assert_close(ours, expected)


@pytest.mark.parametrize("per_position", [False, True])
def test_torch_struct_trims_padding_past_the_longest_sequence(per_position):
    """torch-struct requires one sequence to fill N: padding beyond the longest is cut off."""
    torch_struct = pytest.importorskip("torch_struct")
    emissions, transitions, lengths, _, start, end = _instance(7, per_position)
    lengths = torch.tensor([5, 2, 4, 3, 5])  # N = 7, longest 5
    potentials = peers.to_torch_struct(emissions, transitions, lengths, start, end)
    assert potentials.shape == (5, 4, 4, 4)
    dist = torch_struct.LinearChainCRF(potentials, lengths=lengths)
    crf = implementations.get("crf")
    log_z = crf.log_partition(emissions, transitions, lengths, start=start, end=end)
    torch.testing.assert_close(dist.partition, log_z)
    _, pairwise = crf.marginals(emissions, transitions, lengths, start=start, end=end)
    torch.testing.assert_close(dist.marginals.transpose(-1, -2), pairwise[:, :4])


@pytest.mark.parametrize("per_position", [False, True])
def test_torch_struct_converts_an_empty_batch(per_position):
    emissions, transitions, lengths, _, start, end = _instance(7, per_position)
    empty = (emissions[:0], transitions[:0] if per_position else transitions, lengths[:0])
    assert peers.to_torch_struct(*empty, start, end).shape == (0, 6, 4, 4)

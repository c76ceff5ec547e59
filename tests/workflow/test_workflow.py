"""The Snakemake pipeline: lint, and dry runs of every config and the SLURM profile.

The smoke config is run end to end by `.ci/run` (minutes), not here.
"""

from __future__ import annotations

import fcntl
import re
from pathlib import Path

import pytest

from tests.workflow.pipeline import ROOT, SNAKEMAKE, copy_workflow, snakemake, stub_pretrained_models

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake not installed (extra: pipeline)")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the workflow in a scratch folder, so dry runs never see real results."""
    workdir = copy_workflow(tmp_path_factory.mktemp("workflow"))
    stub_pretrained_models(workdir)
    return workdir


def test_lint_finds_nothing_but_the_missing_conda_directives(workdir: Path) -> None:
    """One Python environment by design, so the conda/container lint is the only one allowed."""
    result = snakemake("--lint", cwd=workdir)
    output = result.stdout + result.stderr
    lints = [line.strip() for line in output.splitlines() if line.strip().startswith("* ")]
    assert lints, output  # the linter ran and reported its one known lint
    assert all(lint.startswith("* Specify a conda environment") for lint in lints), "\n".join(lints)


@pytest.mark.parametrize("configfile", [None, "config/smoke.yaml", "config/paper.yaml"])
def test_every_config_validates_and_plans_every_rule(workdir: Path, configfile: str | None) -> None:
    arguments = ["-n", "--cores", "2"] + (["--configfile", configfile] if configfile else [])
    arguments += ["--config", "device=cpu"]  # the paper's cuda where this machine may have none
    result = snakemake(*arguments, cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for rule in ("prepare_data", "train", "evaluate", "time", "aggregate_metrics", "report"):
        assert f"\n{rule} " in result.stdout, rule
    for rule in ("parse_settings", "parse_train", "parse_evaluate", "aggregate_parse"):
        assert f"\n{rule} " in result.stdout, rule


def test_a_given_config_replaces_the_default_instead_of_merging(workdir: Path) -> None:
    result = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--printshellcmds", cwd=workdir
    )
    assert "results/smoke/runs" in result.stdout
    assert "results/runs/" not in result.stdout and "ud-pos-nl" not in result.stdout


def test_timing_scores_with_the_crf_model_and_costly_decoders_stay_on_their_losses(workdir: Path) -> None:
    """Default profile: each timing job loads the first-seed CRF model (partial CRF for partial
    labels) and runs after it; SparseMAP decoding evaluates only the losses `decoded_losses` names.
    The NER experiments (frozen MiniLM features, which the JAX scorer lacks) are not timed; their
    training jobs wait for the features job."""
    result = snakemake("-n", "--cores", "2", "--printshellcmds", cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    commands = [line for line in result.stdout.splitlines() if "crfbench" in line and " --run-dir " in line]
    timing = [line for line in commands if " time " in line]
    assert len(timing) == 3, timing
    assert all("--weights results/runs/" in line and "/0 " in line for line in timing), timing
    assert not any("conll03" in line for line in timing), timing
    # decoding is timed against the three baselines, as training is (the losses' default list)
    baselines = " viterbi-scan viterbi-pytorch-crf "
    assert all(" viterbi " in line and baselines in line for line in timing), timing
    features = [line for line in result.stdout.splitlines() if "crfbench features" in line]
    assert len(features) == 2 and all("--manifest results/features/conll03-ner" in line for line in features)
    evaluations = {line.split("--run-dir ")[1].split()[0]: line for line in commands if " evaluate " in line}
    assert " sparsemap " in evaluations["results/runs/ud-pos-nl/L0/crf/1"]
    assert " sparsemap " in evaluations["results/runs/ud-pos-nl/L0/m-sparsemap/2"]
    assert "sparsemap" not in evaluations["results/runs/ud-pos-nl/L0/bcrf/0"]
    assert " bcrf-10 " in evaluations["results/runs/ud-pos-nl/L0/bcrf/0"]


def job_counts(output: str) -> dict[str, int]:
    """The job-stats table of a dry run: rule -> jobs planned."""
    table = output.split("Job stats:")[1].split("\ntotal")[0]
    rows = [line.split() for line in table.splitlines()[3:]]
    return {row[0]: int(row[1]) for row in rows if len(row) == 2}


def test_parsers_train_every_seed_at_the_rate_their_grid_chose(workdir: Path) -> None:
    """Smoke profile: each loss's grid runs (its seed, each rate) feed one choice, which the seed
    runs train at; each run is evaluated, the tables gathered and read by the report."""
    result = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--printshellcmds", cwd=workdir
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    commands = [line for line in result.stdout.splitlines() if "-m crfbench parse " in line]
    grid = sorted(line.split("--run-dir ")[1].split()[0] for line in commands if "--learning-rate 0" in line)
    assert grid == [
        f"results/smoke/parse/lr/vi/{loss}/seed0/lr{rate}"
        for loss in ("crf", "sparsemap")
        for rate in ("0.002", "0.004")
    ]
    runs = [line for line in commands if " parse train " in line and "--learning-rate-from" in line]
    assert sorted(line.split("--learning-rate-from ")[1].split()[0] for line in runs) == [
        f"results/smoke/parse/lr/vi/{loss}/chosen.json" for loss in ("crf", "sparsemap")
    ]
    trained = [line for line in commands if " parse train " in line]
    assert len(trained) == 6 and all("--config results/smoke/parse/settings/vi/" in line for line in trained)
    evaluated = sorted(
        line.split("--run-dir ")[1].split()[0] for line in commands if " parse evaluate " in line
    )
    assert evaluated == [f"results/smoke/parse/runs/vi/{loss}/0" for loss in ("crf", "sparsemap")]
    report = result.stdout.split("\nrule report:")[1].split("\n\n")[0]
    assert "results/smoke/parse/metrics.csv" in report and "results/smoke/parse/curves.csv" in report


def test_the_paper_profile_chooses_each_languages_rates_on_its_own_grid(workdir: Path) -> None:
    result = snakemake(
        "-n", "--cores", "2", "--configfile", "config/paper.yaml", "--config", "device=cpu", cwd=workdir
    )  # the paper's cuda where this machine may have none
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    counts = job_counts(result.stdout)
    cells = 4 * 4  # languages x losses
    assert counts["parse_grid_train"] == cells * 5 and counts["parse_choose_lr"] == cells
    assert counts["parse_train"] == counts["parse_evaluate"] == cells * 5  # seeds


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        (
            "epochs: 1, batch_size: 4, max_train_sentences: 8",
            "epochs: 0, batch_size: 4, max_train_sentences: 8",
            "epochs",
        ),
        (
            "{epochs: 1, batch_size: 4, max_train_sentences: 8",
            "{seed: 3, epochs: 1, batch_size: 4, max_train_sentences: 8",
            "'seed'",
        ),
        ("grid: [0.002, 0.004], seed: 0", "grid: [0.002, 0.004], seed: 0, language: en", "'en'"),
    ],
)
def test_a_bad_parser_setting_fails_the_dry_run_naming_it(
    workdir: Path, tmp_path: Path, old: str, new: str, named: str
) -> None:
    text = (workdir / "config/smoke.yaml").read_text()
    assert text.count(old) == 1  # the parsers' settings alone
    config = edit_smoke(workdir, tmp_path, old, new)
    result = snakemake("-n", "--cores", "1", "--configfile", str(config), cwd=workdir)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert named in output and "parsing" in output, output[-2000:]


def test_a_decoder_restricted_to_an_unknown_loss_fails_naming_it(workdir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((workdir / "config/smoke.yaml").read_text() + "decoded_losses: {sparsemap: [crff]}\n")
    result = snakemake("-n", "--cores", "1", "--configfile", str(bad), cwd=workdir)
    assert result.returncode != 0
    assert "decoded_losses: sparsemap: 'crff'" in result.stdout + result.stderr


def test_slurm_profile_plans_the_paper_run(workdir: Path) -> None:
    pytest.importorskip("snakemake_executor_plugin_slurm")
    result = snakemake(
        "-n", "--profile", "workflow/profiles/slurm", "--configfile", "config/paper.yaml", cwd=workdir
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "\ntrain " in result.stdout


def test_a_config_error_names_the_setting(workdir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((workdir / "config/smoke.yaml").read_text().replace("seeds: [0]", "seeds: [zero]"))
    result = snakemake("-n", "--cores", "1", "--configfile", str(bad), cwd=workdir)
    assert result.returncode != 0
    assert "zero" in result.stdout + result.stderr


def test_asv_results_are_tidied_and_published_unless_scaling_is_off(tmp_path: Path) -> None:
    """The scaling table is part of the run; asv's HTML (git-ignored) is a target of its own."""
    from tests.crfbench.asv_fixture import write_asv_results

    copy_workflow(tmp_path)
    marginals = (("backend", "method", "N"), (("torch",), ("crf",), (16,)), [1.0], "seconds")
    write_asv_results(tmp_path / "results/asv", "box", "a" * 40, 1_000, {"m.C.time_marginals": marginals})
    planned = snakemake("-n", "--cores", "2", "--configfile", "config/smoke.yaml", cwd=tmp_path)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    assert "\nscaling_table " in planned.stdout and "\nasv_html " not in planned.stdout
    published = snakemake("asv_html", "-n", "--cores", "1", "--configfile", "config/smoke.yaml", cwd=tmp_path)
    assert "\nasv_html " in published.stdout, published.stdout[-3000:] + published.stderr[-3000:]
    off = snakemake(
        "-n", "--cores", "2", "--configfile", "config/smoke.yaml", "--config", "scaling=False", cwd=tmp_path
    )
    assert off.returncode == 0, off.stdout[-3000:] + off.stderr[-3000:]
    assert "scaling_table" not in off.stdout and "asv_html" not in off.stdout


def test_the_default_workflow_profile_is_loaded_without_being_named(workdir: Path) -> None:
    result = snakemake("-n", "--cores", "2", "--configfile", "config/smoke.yaml", cwd=workdir)
    assert "workflow/profiles/default" in result.stdout + result.stderr


def edit_smoke(workdir: Path, tmp_path: Path, old: str, new: str) -> Path:
    config = tmp_path / "edited.yaml"
    text = (workdir / "config/smoke.yaml").read_text()
    assert old in text
    config.write_text(text.replace(old, new))
    return config


@pytest.mark.parametrize(
    ("old", "new", "named"),
    [
        ("learning_rate: 0.01", "learning_rate: fast", "learning_rate"),
        ("layers: 2, dim: 32", "layers: two, dim: 32", "layers"),
        ("epochs: 2,", "epochs: true,", "epochs"),
    ],
)
def test_a_bad_experiment_setting_fails_the_dry_run_naming_it(
    workdir: Path, tmp_path: Path, old: str, new: str, named: str
) -> None:
    config = edit_smoke(workdir, tmp_path, old, new)
    result = snakemake("-n", "--cores", "1", "--configfile", str(config), cwd=workdir)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert named in output and "experiment" in output, output[-2000:]


def test_a_yaml_exponent_learning_rate_is_read_as_a_number(workdir: Path, tmp_path: Path) -> None:
    """YAML 1.1 reads 1e-3 as a string; the run gets the number it means (was a crash in the job)."""
    config = edit_smoke(workdir, tmp_path, "learning_rate: 0.01", "learning_rate: 1e-3")
    result = snakemake("-n", "--cores", "1", "--configfile", str(config), cwd=workdir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def hold_the_live_run_lock(workdir: Path):
    """What a live pipeline run holds (see workflow/rules/common.smk): the flock on its lock file."""
    path = workdir / ".snakemake/crfbench-live.lock"
    path.parent.mkdir(exist_ok=True)
    handle = path.open("a")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return handle


def test_stale_locks_are_cleared_but_a_live_runs_locks_are_respected(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path)
    locks = workdir / ".snakemake/locks"
    locks.mkdir(parents=True)
    target = ("results/smoke/data/synthetic.json", "--cores", "1", "--configfile", "config/smoke.yaml")
    with hold_the_live_run_lock(workdir):
        (locks / "0.output.lock").write_text("results/smoke/data/synthetic.json\n")  # as Snakemake writes it
        live = snakemake(*target, cwd=workdir)
    assert live.returncode != 0 and "LockException" in live.stdout + live.stderr
    assert not (workdir / "results/smoke/data/synthetic.json").exists()
    stale = snakemake(*target, cwd=workdir)  # the holder is gone: its locks are stale
    assert stale.returncode == 0, stale.stdout[-3000:] + stale.stderr[-3000:]
    assert (workdir / "results/smoke/data/synthetic.json").exists()
    assert not list(locks.glob("*.lock"))


def one_line_error(result) -> str:
    """The message of the WorkflowError a dry run stopped with (the line after its header)."""
    lines = (result.stdout + result.stderr).splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("WorkflowError"))
    return lines[header + 1]


@pytest.mark.parametrize(
    ("data", "named"),
    [
        (None, "no data dir: set CRFBENCH_DATA"),
        ("/nowhere/at/all", "'/nowhere/at/all' ($CRFBENCH_DATA) is not a folder"),
    ],
)
def test_a_dry_run_without_the_data_dir_fails_naming_it(workdir: Path, data: str | None, named: str) -> None:
    result = snakemake("-n", "--cores", "1", cwd=workdir, env={"CRFBENCH_DATA": data})
    assert result.returncode != 0
    assert named in one_line_error(result)


def test_a_dry_run_names_a_corpus_folder_missing_from_the_data_dir(workdir: Path, tmp_path: Path) -> None:
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper/bcrf_tables.csv").write_text("table\n")
    result = snakemake(
        "-n",
        "--cores",
        "1",
        "--configfile",
        "config/smoke.yaml",
        cwd=workdir,
        env={"CRFBENCH_DATA": str(tmp_path)},
    )
    assert result.returncode != 0
    assert one_line_error(result) == (
        f"dataset conll03-ner-partial: conll2003/ is not in the data dir {tmp_path} ($CRFBENCH_DATA)"
    )


def test_a_dry_run_names_a_missing_pretrained_model_folder(tmp_path: Path) -> None:
    workdir = copy_workflow(tmp_path)  # no stand-ins for the BERT folders
    result = snakemake("-n", "--cores", "1", "--configfile", "config/paper.yaml", cwd=workdir)
    assert result.returncode != 0
    assert "config: encoders: bert-base: pretrained model 'models/bert-base-cased'" in one_line_error(result)


def test_a_dry_run_names_a_device_this_machine_lacks(workdir: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    result = snakemake("-n", "--cores", "1", "--configfile", "config/paper.yaml", cwd=workdir)
    assert result.returncode != 0
    assert (
        one_line_error(result) == "config: device: 'cuda' is not available: this machine has no CUDA device"
    )


def schema_keys(node: dict) -> set[str]:
    """Every property name of the config schema, at any depth (an experiment's keys included)."""
    names = set(node.get("properties", {}))
    for child in [*node.get("properties", {}).values(), node.get("items"), node.get("additionalProperties")]:
        if isinstance(child, dict) and child:
            names |= schema_keys(child)
    return names


def test_config_readme_describes_every_config_key() -> None:
    yaml = pytest.importorskip("yaml")
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    readme = (ROOT / "config/README.md").read_text()
    described = {word for span in re.findall(r"`([^`]+)`", readme) for word in re.findall(r"\w+", span)}
    missing = sorted(schema_keys(schema) - described)
    assert not missing, f"config/README.md does not describe {missing}"

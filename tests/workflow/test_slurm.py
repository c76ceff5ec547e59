"""The SLURM profile's sbatch commands: the smoke config with a `cluster` section submitted through
snakemake-executor-plugin-slurm to a stand-in `sbatch` that records its arguments and refuses the job
(so Snakemake stops after one round of submissions, nothing waiting on a queue), issue 49."""

from __future__ import annotations

import os
import re

import pytest

from crfbench import schema
from tests.workflow.pipeline import SNAKEMAKE, copy_workflow, snakemake

pytestmark = pytest.mark.skipif(not SNAKEMAKE.exists(), reason="snakemake not installed (extra: pipeline)")
pytest.importorskip("snakemake_executor_plugin_slurm")

CLUSTER = "cluster: {account: acct-test, cpu_partition: cpu-part, gpu_partition: gpu-part}\n"
#: The first-seed CRF run of each smoke experiment: its model stands in as trained, so that the jobs
#: reading it (evaluation, sweep, timing) are submitted in the first round with the training jobs.
TRAINED = (
    "synthetic/L0/crf",
    "ud-pos-en/L2/crf",
    "ud-seg-ja/L0/crf",
    "conll03-ner-partial/minilm/crf-partial",
)
FAKE_SBATCH = '#!/bin/sh\necho "$@" >> "$SBATCH_LOG"\necho "sbatch: error: refused by the test" >&2\nexit 1\n'
FAKE_SACCTMGR = "#!/bin/sh\necho acct-test\n"  # the accounts the user may charge (the plugin checks)


@pytest.fixture(scope="module")
def submissions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """Each submitted job's sbatch arguments, by its comment (``rule_NAME[_wildcards_...]``)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("slurm"))
    config = workdir / "cluster.yaml"
    config.write_text((workdir / "config/smoke.yaml").read_text() + "gpus_per_job: 1\n" + CLUSTER)
    results = workdir / "results/smoke"
    for dataset in ("synthetic", "ud-pos-en", "ud-seg-ja", "conll03-ner-partial"):
        facts = results / schema.DATA_FACTS.format(dataset=dataset)
        facts.parent.mkdir(parents=True, exist_ok=True)
        facts.write_text("{}\n")
    for run in TRAINED:
        summary = results / "runs" / run / "0" / schema.SUMMARY_FILE
        summary.parent.mkdir(parents=True)
        summary.write_text("{}\n")
    bin_dir = workdir / "bin"
    bin_dir.mkdir()
    for name, text in (("sbatch", FAKE_SBATCH), ("sacctmgr", FAKE_SACCTMGR)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    log = workdir / "sbatch.log"
    result = snakemake(
        *("--profile", "workflow/profiles/slurm", "--configfile", str(config), "--keep-going"),
        *("--latency-wait", "0"),
        cwd=workdir,
        env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "SBATCH_LOG": str(log)},
    )
    assert log.exists(), result.stdout[-3000:] + result.stderr[-3000:]
    calls = [line.split() for line in log.read_text().splitlines()]
    return {call[call.index("--comment") + 1]: call for call in calls}


def option(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


def jobs_of(submissions: dict[str, list[str]], rule: str) -> list[list[str]]:
    found = [
        call for comment, call in submissions.items() if re.fullmatch(f"rule_{rule}(_wildcards_.*)?", comment)
    ]
    assert found, (rule, sorted(submissions))
    return found


@pytest.mark.parametrize("rule", ["train", "evaluate", "sweep", "time"])
def test_gpu_jobs_go_to_the_gpu_partition_with_their_gpus(submissions, rule: str) -> None:
    for call in jobs_of(submissions, rule):
        assert option(call, "-p") == "gpu-part"
        assert "--gpus=1" in call


@pytest.mark.parametrize(
    "rule", ["agreement", "bethe_cgm", "bethe_ocr_fold", "bethe_citation_run", "newton_train"]
)
def test_cpu_jobs_go_to_the_cpu_partition_without_gpus(submissions, rule: str) -> None:
    for call in jobs_of(submissions, rule):
        assert option(call, "-p") == "cpu-part"
        assert not any(argument.startswith("--gpus") for argument in call)


def test_every_job_is_charged_to_the_account_with_a_time_and_memory_limit(submissions) -> None:
    for call in submissions.values():
        assert option(call, "-A") == "acct-test"
        assert option(call, "-t") and option(call, "--mem")


def test_only_timing_jobs_get_a_node_of_their_own(submissions) -> None:
    """The jobs that time something (Tables 2-3, the CGM solvers, the Newton solvers and Hv costs,
    SparseMAP's solvers on trees) and no other."""
    alone = {
        comment.split("_wildcards_")[0] for comment, call in submissions.items() if "--exclusive" in call
    }
    timed = {"rule_time", "rule_bethe_cgm", "rule_newton_train", "rule_newton_cost", "rule_tree_solvers"}
    assert alone == timed

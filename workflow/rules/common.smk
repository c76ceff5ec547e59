# Shared helpers: which runs the config asks for, and each run's settings (RunConfig fields);
# recovery from an interrupted run and checks of every run's settings before anything runs.
import fcntl
import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from crfbench import schema  # every results file's name, relative to the results folder
from crfbench.cli_args import ALLOW_DIRTY_VARIABLE
from crfbench.config import RunConfig, check_device_available, profile_digest
from crfbench.data import citation, ocr
from crfbench.data.location import ENV_VAR as DATA_VARIABLE
from crfbench.data.registry import source_folder
from crfbench.io import write_json  # atomic, as every output of the engine
from crfbench.objectives import DECODERS, LOSSES
from crfbench.uses import BASELINE_DECODERS

#: The config as given and validated, before the defaults below: what its committed run records.
PROFILE_DIGEST = profile_digest(config)
config.setdefault("decoders", list(DECODERS))  # every decoder of implementations.registry
RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
CRFBENCH = f"{shlex.quote(sys.executable)} -m crfbench"  # the environment Snakemake runs in
# A job refuses to write results from a git checkout with uncommitted changes unless the config's
# allow_dirty says so; the flag reaches the jobs through their environment (crfbench.cli_args), so
# that turning it on reruns nothing.
if config.get("allow_dirty"):
    os.environ[ALLOW_DIRTY_VARIABLE] = "1"


def data_dir():
    """The corpus folder: the config's, else $CRFBENCH_DATA (the engine checks it exists)."""
    return config.get("data_dir") or os.environ.get("CRFBENCH_DATA", "")


def runs():
    """Every (experiment, dataset, encoder, loss, seed) the config asks for."""
    for experiment in config["experiments"]:
        for dataset in experiment["datasets"]:
            for encoder in experiment["encoders"]:
                for loss in experiment["losses"]:
                    for seed in config["seeds"]:
                        yield experiment, dataset, encoder, loss, seed


def timed():
    """Every (experiment, dataset, encoder) to time, once each, with the first seed."""
    seen = set()
    for experiment, dataset, encoder, _, _ in runs():
        if experiment.get("timing", True) and (dataset, encoder) not in seen:
            seen.add((dataset, encoder))
            yield experiment, dataset, encoder


def swept():
    """(dataset, encoder) of every run trained with the CRF loss, once each: its first seed."""
    return sorted({(d, e) for _, d, e, loss, _ in runs() if loss == "crf"})


def experiment_of(dataset: str, encoder: str) -> dict:
    """The first experiment in the config that trains ``dataset`` with ``encoder``: it holds the
    settings and scorer of those runs; a pair no experiment asks for is a config error."""
    for experiment, d, e, _, _ in runs():
        if (d, e) == (dataset, encoder):
            return experiment
    raise ValueError(f"config: no experiment trains {dataset!r} with encoder {encoder!r}")


def canonical(value):
    """``value`` with every mapping's keys in sorted order, at every depth. Snakemake reruns a job
    whose params' text changed, so params built from the config must not depend on the order its
    keys are written in: a re-dumped or reordered config file would rerun every job downstream."""
    if isinstance(value, dict):
        return {key: canonical(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def run_settings(dataset, encoder, loss, seed):
    """The RunConfig of one run: the experiment's settings and scorer laid over the encoder's."""
    if encoder not in config["encoders"]:
        raise ValueError(f"config: encoder {encoder!r} is not defined under `encoders`")
    experiment = experiment_of(dataset, encoder)
    named = config["encoders"][encoder]
    settings = {**named.get("settings", {}), **experiment.get("settings", {})}
    settings = settings | {
        "dataset": dataset,
        "data_dir": config.get("data_dir"),
        "scorer": {**named["scorer"], **experiment.get("scorer", {})},
        "encoder_name": encoder,
        "loss": loss,
        "seed": int(seed),
        "device": config["device"],
        "threads": config["threads"],
    }
    return canonical(settings)


def check_run_settings():
    """Every run's settings through ``RunConfig`` at parse time, so that a bad value in an
    experiment's ``settings``, ``scorer`` or ``losses`` (or a decoder name) fails the dry run
    naming it, not a job's log later."""
    unknown = [name for name in config["decoders"] if name not in DECODERS]
    if unknown:
        raise WorkflowError(f"config: decoders: {unknown[0]!r} is not one of {', '.join(DECODERS)}")
    for decoder, losses in config.get("decoded_losses", {}).items():
        if decoder not in DECODERS:
            raise WorkflowError(f"config: decoded_losses: {decoder!r} is not one of {', '.join(DECODERS)}")
        unknown = [name for name in losses if name not in LOSSES]
        if unknown:
            raise WorkflowError(
                f"config: decoded_losses: {decoder}: {unknown[0]!r} is not one of {', '.join(LOSSES)}"
            )
    checked = set()
    for experiment, dataset, encoder, loss, _ in runs():
        if (dataset, encoder, loss) in checked:
            continue
        checked.add((dataset, encoder, loss))
        try:
            RunConfig.from_dict(run_settings(dataset, encoder, loss, config["seeds"][0]))
        except (TypeError, ValueError) as error:
            where = f"experiment {experiment['name']!r} ({dataset}, encoder {encoder}, loss {loss})"
            raise WorkflowError(f"config: {where}: {error}") from None


def check_environment():
    """What the config's jobs need from this machine, checked at parse time so that a dry run fails
    in one line naming what is missing rather than a job's log later: the data dir and every corpus
    folder the config reads, the paper's numbers the report reads, the pretrained encoders' model
    folders, and the device where jobs run here (a run that submits its jobs, ``--jobs`` as the
    SLURM profile sets, leaves the device to each job: the engine checks it before writing)."""
    where = data_dir()
    origin = "the config's data_dir" if config.get("data_dir") else f"${DATA_VARIABLE}"
    if not where:
        raise WorkflowError(
            f"no data dir: set {DATA_VARIABLE} (or the config's data_dir) to the folder holding ud-2.15/ and conll2003/"
        )
    if not Path(where).is_dir():
        raise WorkflowError(f"data dir {where!r} ({origin}) is not a folder")
    needed = [(source_folder(dataset), f"dataset {dataset}") for dataset in sorted({d for _, d, _, _, _ in runs()})]
    needed += [(os.path.dirname(ocr.RELATIVE_PATH), "bethe: ocr")] if "ocr" in BETHE else []
    needed += [(os.path.dirname(citation.FILES["train"]), "bethe: citation")] if "citation" in BETHE else []
    needed += [(source_folder("conll03-ner"), "newton: train")] if "train" in NEWTON else []
    for folder, user in needed:
        if folder and not Path(where, folder).is_dir():
            raise WorkflowError(f"{user}: {folder}/ is not in the data dir {where} ({origin})")
    if not Path(paper_tables()).is_file():
        raise WorkflowError(f"report: the paper's numbers {paper_tables()} are not in the data dir ({origin})")
    from crfbench.models.config import DEFAULT_PRETRAINED
    from crfbench.models.pretrained import resolve_pretrained

    for name in sorted({encoder for _, _, encoder, _, _ in runs()}):
        scorer = config["encoders"].get(name, {}).get("scorer", {})
        if scorer.get("encoder") == "pretrained":
            try:
                resolve_pretrained(scorer.get("pretrained", DEFAULT_PRETRAINED))
            except (ImportError, ValueError) as error:
                raise WorkflowError(f"config: encoders: {name}: {error}") from None
    if not submitting_jobs():
        try:
            check_device_available(config["device"])
        except ValueError as error:
            raise WorkflowError(f"config: {error}") from None


def submitting_jobs():
    """Whether this run submits its jobs to a cluster or cloud rather than running them here:
    ``--jobs`` (``nodes``) is set, as the SLURM profile sets it (Snakemake takes a local run's
    ``--jobs`` as ``--cores``)."""
    return workflow.resource_settings.nodes is not None


def alone_threads():
    """The threads of a job that must run alone (timing): every core of a local run, so that
    nothing runs beside it; 1 where jobs are submitted, each such job getting a node of its own
    (``cluster_resources(exclusive=True)``). A command that runs no job (``--report``, ``--lint``)
    may give no ``--cores``: then 1."""
    if submitting_jobs():
        return 1
    try:
        return workflow.cores
    except WorkflowError:
        return 1


CLUSTER = config.get("cluster", {})


def cluster_resources(gpu=False, exclusive=False):
    """A job's SLURM resources (snakemake-executor-plugin-slurm reads them; a local run ignores
    them), from the config's ``cluster`` section (none without it): the GPU partition for a job
    that asks for GPUs (``gpu`` and ``gpus_per_job`` > 0), the CPU partition otherwise, the account,
    and a node of its own for a timing job (``exclusive``)."""
    if not CLUSTER:
        return {}
    uses_gpu = gpu and config["gpus_per_job"] > 0
    resources = {"slurm_partition": CLUSTER["gpu_partition" if uses_gpu else "cpu_partition"]}
    if CLUSTER.get("account"):
        resources["slurm_account"] = CLUSTER["account"]
    if exclusive:
        resources["slurm_extra"] = "--exclusive"
    return resources


def paper_tables():
    """The paper's numbers (the BCRF paper's tables) that the report sets beside ours."""
    return os.path.join(data_dir(), "paper", "bcrf_tables.csv")


def evaluation_decoders(loss):
    """The decoders that evaluate a model trained with ``loss``: those of the config, less any
    that ``decoded_losses`` keeps to other losses."""
    restricted = config.get("decoded_losses", {})
    return [name for name in config["decoders"] if name not in restricted or loss in restricted[name]]


def timing_settings(dataset, encoder):
    """Settings of a timing job: the experiment's first loss (timing measures them all)."""
    experiment = experiment_of(dataset, encoder)
    return run_settings(dataset, encoder, experiment["losses"][0], config["seeds"][0])


TIMED_NETWORK_LOSSES = ("crf", "crf-partial")  # the first of these the experiment trains


def timing_network(dataset, encoder):
    """The run folder whose model a timing job scores with: the experiment's first-seed CRF run
    (SparseMAP's cost depends on the scores, and a trained model's are what training and
    decoding meet), or [] when the experiment trains no CRF (a fresh network is timed)."""
    losses = [loss for loss in experiment_of(dataset, encoder)["losses"] if loss in TIMED_NETWORK_LOSSES]
    if not losses:
        return []
    return [RUN_DIR.format(dataset=dataset, encoder=encoder, loss=losses[0], seed=config["seeds"][0])]


ASV_RESULTS = "results/asv"  # asv.conf.json's results_dir: `asv run` writes it, rules only read it


def asv_result_files():
    """Every asv results file (and machine.json) of every machine, when `scaling` is on."""
    if not config.get("scaling", True):
        return []
    return sorted(str(path) for path in Path(ASV_RESULTS).glob("*/*.json"))


def device_timing_files():
    """Timing tables measured on a lent GPU and committed (results/gpu/<machine>/timing/<dataset>/
    <encoder>/timing.csv, written by benchmarks/gpu_session.sh): joined to this run's timing table
    so that Tables 2-3 and the claim ledger show them beside the CPU rows."""
    return sorted(str(path) for path in Path(RESULTS).glob(schema.DEVICE_TIMING_FILES))


@functools.cache
def changed_reference_files():
    """The paths under the results and reports folders that differ from the commit (changed,
    deleted or new: ``git status``), or None outside a git checkout."""
    try:
        status = subprocess.run(
            ["git", "status", "--porcelain", "-z", "--untracked-files=all", "--", RESULTS, REPORTS],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if status.returncode != 0:
        return None
    return {entry[3:] for entry in status.stdout.split("\0") if len(entry) > 3}


@functools.cache
def reference_as_checked_out():
    """Whether this checkout holds the committed reference run of this config just as git wrote it:
    the results record this config's digest (``crfbench.config.profile_digest``), nothing under the
    results and reports folders differs from the commit, Snakemake has recorded no job here
    (``.snakemake/metadata`` is empty) and no rerun is forced. Evaluated when the DAG is built, once
    the forcing options are known."""
    forced = workflow.dag_settings
    if forced is None or forced.forceall or forced.forcetargets or forced.forcerun:
        return False
    if any(path.is_file() for path in Path(".snakemake/metadata").rglob("*")):
        return False
    return committed_profile_digest() == PROFILE_DIGEST and changed_reference_files() == set()


def committed_profile_digest():
    """The config digest that the report job recorded with the results (``REPORT_NOTES``), or None:
    results made under another config (other seeds, data or settings) are not this config's run."""
    try:
        return json.loads(Path(results_file(schema.REPORT_NOTES)).read_text()).get("config_digest")
    except (OSError, ValueError, AttributeError):
        return None


def reference(paths, made_by_a_rule=True):
    """An input function of committed files ``paths`` (a path or a list) for a rule whose outputs
    are committed too. A clone's timestamps are the order git happened to write its files in, so
    comparing them would rerun the report (or the scaling or timing table) of a fresh clone at
    random: such inputs are ancient (their timestamps ignored) while they are as committed. A file
    that a rule makes is ancient only while ``reference_as_checked_out()``, since an ancient input
    never reruns its rule when the job making it reruns; one that no rule makes (asv's results, the
    GPU timing tables) while git reports it unchanged. Snakemake 9's timestamp test cannot be
    switched off otherwise (``--rerun-triggers`` leaves it on)."""

    def as_committed(path):
        if made_by_a_rule:
            return reference_as_checked_out()
        changed = changed_reference_files()
        return changed is not None and os.path.normpath(path) not in changed

    if isinstance(paths, str):
        return lambda wildcards: ancient(paths) if as_committed(paths) else paths
    paths = list(paths)
    return lambda wildcards: [ancient(path) if as_committed(path) else path for path in paths]


RUN_DIR = f"{RESULTS}/{schema.RUN_DIR}"
TIMING_DIR = f"{RESULTS}/{schema.TIMING_DIR}"
FEATURE_MANIFEST = f"{RESULTS}/features/{{dataset}}/{{encoder}}.json"


def first_run(dataset, encoder):
    """(loss, seed) of the first run of (dataset, encoder): its experiment's first loss and seed."""
    return experiment_of(dataset, encoder)["losses"][0], config["seeds"][0]


def feature_run_settings(dataset, encoder):
    """The settings file of the first run of (dataset, encoder): what its features job reads."""
    loss, seed = first_run(dataset, encoder)
    return f"{RUN_DIR.format(dataset=dataset, encoder=encoder, loss=loss, seed=seed)}/{schema.SETTINGS_FILE}"


def feature_manifest(dataset, encoder):
    """[the features job's manifest] for a (dataset, encoder) whose scorer reads frozen features
    (its training jobs wait for it), else []."""
    if run_settings(dataset, encoder, *first_run(dataset, encoder))["scorer"].get("encoder") != "frozen":
        return []
    return [FEATURE_MANIFEST.format(dataset=dataset, encoder=encoder)]


def results_file(name):
    """The path of the results file ``name`` (a ``crfbench.schema`` path) under the results folder."""
    return f"{RESULTS}/{name}"


def run_files(name):
    """The file ``name`` (a ``crfbench.schema`` run-folder file) of every run, in ``runs()`` order."""
    return [os.path.join(RUN_DIR.format(dataset=d, encoder=e, loss=l, seed=s), name) for _, d, e, l, s in runs()]


LIVE_RUN_LOCK = ".snakemake/crfbench-live.lock"
LIVE_RUN_VARIABLE = "CRFBENCH_PIPELINE_LIVE"  # set in the run holding the lock; its jobs inherit it
_live_run_lock = None  # the open lock file, held for the life of this Snakemake process


def clear_stale_locks():
    """Remove the working-directory locks a killed run left behind, so a plain rerun resumes.

    Snakemake marks its working directory as locked with files under ``.snakemake/locks`` that a
    killed run never removes: the next run stops with a LockException until ``--unlock``. A file
    lock (``flock``) tells a live run from a dead one, since the kernel drops it with its process
    however that process ends. The Snakemake process that takes it is the only live pipeline run
    here, so any lock files are stale and go; a run started while another is live does not get it,
    leaves the files, and Snakemake refuses it as before. Jobs that Snakemake spawns (they parse
    this file again) inherit ``LIVE_RUN_VARIABLE`` and skip all this.
    """
    global _live_run_lock
    if os.environ.get(LIVE_RUN_VARIABLE):
        return
    Path(LIVE_RUN_LOCK).parent.mkdir(exist_ok=True)
    handle = open(LIVE_RUN_LOCK, "a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # another run of this pipeline is live: its locks are real
        handle.close()
        return
    _live_run_lock = handle
    os.environ[LIVE_RUN_VARIABLE] = "1"
    for stale in Path(".snakemake/locks").glob("*.lock"):
        stale.unlink(missing_ok=True)


# The Bethe-projection paper's experiments (rules/bethe.smk): which the config asks for, and where.
BETHE = config.get("bethe", {})


OCR_FOLD = f"{RESULTS}/{schema.OCR_FOLD}"
CITATION_RUN = f"{RESULTS}/{schema.CITATION_RUN}"
#: A citation run's tables, and the results table each is gathered into.
CITATION_TABLES = schema.CITATION_TABLES


def citation_run_file(name):
    """A citation run's table ``name`` (a key of ``CITATION_TABLES``), in the run's folder."""
    return schema.CITATION_RUN_FILE.format(name=name)


def bethe_tables():
    """The result tables of the Bethe experiments the config asks for."""
    tables = {
        "cgm": [rules.bethe_cgm.output[0]],
        "ocr": list(rules.bethe_ocr.output),
        "citation": list(rules.bethe_citation.output),
    }
    return [path for name, paths in tables.items() if name in BETHE for path in paths]


def set_arguments(settings):
    """The command-line overrides (``--set NAME=VALUE``, quoted) of a ``settings`` mapping, in
    ``canonical`` order."""
    return " ".join(
        f"--set {shlex.quote(f'{name}={json.dumps(value)}')}" for name, value in canonical(settings).items()
    )


def bethe_settings(experiment):
    """The overrides of the Bethe experiment's ``settings`` mapping in the config."""
    return set_arguments(BETHE.get(experiment, {}).get("settings", {}))


# The Newton-CRF study (rules/newton.smk).
NEWTON = config.get("newton", {})


def newton_tables():
    """The result tables of the Newton study's parts the config asks for."""
    tables = {"train": list(rules.newton_train.output), "cost": list(rules.newton_cost.output)}
    return [path for name, paths in tables.items() if name in NEWTON for path in paths]


# The SparseMAP solvers on random trees (rules/tree_solvers.smk): run only where the config has the key.
TREE_SOLVERS = config.get("tree_solvers")


def tree_solver_tables():
    """The tree-solver study's table, when the config asks for it."""
    return list(rules.tree_solvers.output) if TREE_SOLVERS is not None else []


def ocr_folds(name):
    """Every OCR fold's ``name`` file (``schema.OCR_FOLD_TABLE`` or ``OCR_FOLD_WORDS``)."""
    return [f"{OCR_FOLD.format(fold=fold)}/{name}" for fold in BETHE.get("ocr", {}).get("folds", [])]


# The SparseMAP paper's dependency parsers (rules/parse.smk): languages x losses x seeds, each
# (language, loss) at the learning rate its grid runs chose on dev, or at the grid's one rate.
PARSING = config.get("parsing", {})
PARSE_RUN = f"{RESULTS}/{schema.PARSE_RUN_DIR}"
PARSE_GRID_RUN = f"{RESULTS}/{schema.PARSE_GRID_RUN_DIR}"
#: Settings the pipeline gives each parser run itself, never the config's `parsing.settings`.
PARSE_RUN_OWN = ("dataset", "loss", "seed", "learning_rate", "device", "threads")


def parse_runs():
    """Every (language, loss, seed) of the parsers the config asks for."""
    for language in PARSING.get("languages", []):  # no `parsing` section: no parsers
        for loss in PARSING["losses"]:
            for seed in PARSING["seeds"]:
                yield language, loss, seed


def learning_rate_grid():
    """The learning rates tried on dev, as the grid runs' folders spell them (Python's repr)."""
    return [repr(float(rate)) for rate in PARSING["learning_rate"]["grid"]]


def parse_settings(language, loss):
    """The settings of a (language, loss)'s parser runs but seed and learning rate (ParseConfig
    fields), the grid's one rate when it has only one."""
    settings = {**PARSING.get("settings", {}), "dataset": language, "loss": loss}
    settings |= {"device": config["device"], "threads": config["threads"]}
    grid = PARSING["learning_rate"]["grid"]
    if len(grid) == 1:
        settings["learning_rate"] = float(grid[0])
    return canonical(settings)


def parse_learning_rate_file(language, loss):
    """The choice a (language, loss)'s runs train at: made on `learning_rate.language` when the
    config names one (shared by every language), else on the run's own; [] for a fixed rate."""
    if len(PARSING["learning_rate"]["grid"]) == 1:
        return []
    on = PARSING["learning_rate"].get("language") or language
    return [f"{RESULTS}/{schema.PARSE_LEARNING_RATE_FILE}".format(language=on, loss=loss)]


def parse_grid_runs(language, loss):
    """The finished grid runs (train.json) that choose a (language, loss)'s learning rate."""
    seed = PARSING["learning_rate"]["seed"]
    runs = [PARSE_GRID_RUN.format(language=language, loss=loss, seed=seed, learning_rate=rate) for rate in learning_rate_grid()]
    return [os.path.join(run, schema.SUMMARY_FILE) for run in runs]


def parse_run_files(name):
    """The file ``name`` (a ``crfbench.schema`` run-folder file) of every parser run."""
    return [os.path.join(PARSE_RUN.format(language=l, loss=o, seed=s), name) for l, o, s in parse_runs()]


def parse_tables():
    """The parsers' results tables (metrics, sentences, curves), when the config asks for parsers."""
    if not PARSING:
        return []
    tables = (schema.PARSE_METRICS_TABLE, schema.PARSE_SENTENCES_TABLE, schema.PARSE_CURVES_TABLE)
    return [results_file(name) for name in tables]


def check_parse_settings():
    """Every (language, loss)'s parser settings through ``ParseConfig`` at parse time, with each
    rate of the grid, so that a bad value fails the dry run naming it."""
    from crfbench.parsing.run import ParseConfig

    if not PARSING:
        return
    given = [name for name in PARSE_RUN_OWN if name in PARSING.get("settings", {})]
    if given:
        raise WorkflowError(f"config: parsing: settings: {given[0]!r} is set by the pipeline, not here")
    language = PARSING["learning_rate"].get("language")
    if language is not None and language not in PARSING["languages"]:
        raise WorkflowError(f"config: parsing: learning_rate: language {language!r} is not in parsing.languages")
    for language in PARSING["languages"]:
        for loss in PARSING["losses"]:
            for rate in PARSING["learning_rate"]["grid"]:
                settings = parse_settings(language, loss) | {"learning_rate": float(rate)}
                try:
                    ParseConfig.from_dict(settings | {"seed": PARSING["seeds"][0]})
                except (TypeError, ValueError) as error:
                    raise WorkflowError(f"config: parsing ({language}, loss {loss}): {error}") from None

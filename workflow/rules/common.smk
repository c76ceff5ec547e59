# Shared helpers: which runs the config asks for, and each run's settings (RunConfig fields).
import os
import shlex
import sys
from pathlib import Path

from crfbench.io import write_json  # atomic, as every output of the engine

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
CRFBENCH = f"{shlex.quote(sys.executable)} -m crfbench"  # the environment Snakemake runs in


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


def experiment_of(dataset, encoder):
    for experiment, d, e, _, _ in runs():
        if (d, e) == (dataset, encoder):
            return experiment
    raise ValueError(f"no experiment trains {{dataset}} with encoder {{encoder}}")


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
    return dict(sorted(settings.items()))  # a stable order: Snakemake compares params


def timing_settings(dataset, encoder):
    """Settings of a timing job: the experiment's first loss (timing measures them all)."""
    experiment = experiment_of(dataset, encoder)
    return run_settings(dataset, encoder, experiment["losses"][0], config["seeds"][0])


ASV_RESULTS = "results/asv"  # asv.conf.json's results_dir: `asv run` writes it, rules only read it


def asv_result_files():
    """Every asv results file (and machine.json) of every machine, when `scaling` is on."""
    if not config.get("scaling", True):
        return []
    return sorted(str(path) for path in Path(ASV_RESULTS).glob("*/*.json"))


RUN_DIR = f"{RESULTS}/runs/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}"
TIMING_DIR = f"{RESULTS}/timing/{{dataset}}/{{encoder}}"

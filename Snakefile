# crfbench pipeline: prepare data -> train -> evaluate -> time -> agreement -> aggregate -> report.
#
#   snakemake --cores 2                                   # default profile (config/default.yaml)
#   snakemake --cores 2 --configfile config/smoke.yaml    # every rule on tiny data, minutes
#   snakemake --cores 8 --configfile config/paper.yaml    # the paper's protocol (GPU machines)
#
# Orchestration only: every rule calls the `crfbench` command line (see workflow/README.md).
from snakemake.utils import min_version, validate

min_version("9.0")


if not config:  # no --configfile: the default profile (a given one replaces it, never merges)

    configfile: "config/default.yaml"



validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/timing.smk"
include: "workflow/rules/agreement.smk"
include: "workflow/rules/scaling.smk"
include: "workflow/rules/report.smk"


# Small bookkeeping jobs run where Snakemake runs, never as cluster jobs.
localrules:
    all,
    run_settings,
    timing_settings,
    report_notes,
    aggregate_metrics,
    aggregate_timing,
    scaling_table,
    asv_html,


rule all:
    input:
        rules.report.output,
        rules.agreement.output,
        rules.asv_html.output if asv_result_files() else [],

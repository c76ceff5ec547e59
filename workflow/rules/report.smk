# Gather the per-run tables into results/, then regenerate reports/ from results/ alone.

rule aggregate_metrics:
    input:
        run_files(schema.EVALUATION_FILE),
    output:
        report(results_file(schema.METRICS_TABLE), caption="../report/metrics.rst", category="Tables"),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_metrics.log",
    shell:
        "{params.cli} aggregate {input} --out {output} --overwrite > {log} 2>&1"


rule aggregate_sentences:
    input:
        run_files(schema.SENTENCES_FILE),
    output:
        results_file(schema.SENTENCES_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_sentences.log",
    shell:
        "{params.cli} aggregate {input} --out {output} --overwrite > {log} 2>&1"


rule aggregate_curves:
    input:
        run_files(schema.SUMMARY_FILE),
    output:
        report(results_file(schema.CURVES_TABLE), caption="../report/curves.rst", category="Tables"),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_curves.log",
    shell:
        "{params.cli} aggregate {input} --out {output} --overwrite > {log} 2>&1"


rule aggregate_datasets:
    # The data every run used (sizes after the profile's cuts), from the config.json that training
    # writes beside train.json; the report's regime flags and dataset-statistics table read it.
    input:
        run_files(schema.SUMMARY_FILE),
    output:
        results_file(schema.DATASETS_TABLE),
    params:
        cli=CRFBENCH,
        configs=lambda w, input: [os.path.join(os.path.dirname(path), schema.CONFIG_FILE) for path in input],
    log:
        f"{RESULTS}/logs/aggregate_datasets.log",
    shell:
        "{params.cli} aggregate {params.configs} --out {output} --overwrite > {log} 2>&1"


rule aggregate_timing:
    input:
        [os.path.join(TIMING_DIR.format(dataset=d, encoder=e), schema.TIMING_FILE) for _, d, e in timed()],
        reference(device_timing_files(), made_by_a_rule=False),
    output:
        report(results_file(schema.TIMING_TABLE), caption="../report/timing.rst", category="Tables"),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_timing.log",
    shell:
        "{params.cli} aggregate {input} --out {output} --overwrite > {log} 2>&1"


rule report:
    # The profile's notes are written by the job that renders them: a separate job would be left
    # alone whenever its file exists, and the committed reference run showed a first profile's notes
    # for many runs after (2 seeds where the profile trains 3).
    input:
        metrics=reference(results_file(schema.METRICS_TABLE)),
        sentences=reference(results_file(schema.SENTENCES_TABLE)),
        curves=reference(results_file(schema.CURVES_TABLE)),
        datasets=reference(results_file(schema.DATASETS_TABLE)),
        sweep=reference([rules.aggregate_sweep.output[0]] if swept() else []),
        timing=reference(results_file(schema.TIMING_TABLE)),
        agreement=reference(results_file(schema.AGREEMENT_TABLE)),
        scaling=reference([rules.scaling_table.output[0]] if asv_result_files() else []),
        bethe=reference(bethe_tables()),
        newton=reference(newton_tables()),
        tree_solvers=reference(tree_solver_tables()),
        parse=reference(parse_tables()),
    output:
        report(f"{REPORTS}/index.html", caption="../report/index.rst", category="Report"),
        f"{REPORTS}/README.md",
        notes=results_file(schema.REPORT_NOTES),
        figures=report(
            directory(f"{REPORTS}/figures"), patterns=["{name}.png"], caption="../report/figures.rst", category="Figures"
        ),
        tables=report(
            directory(f"{REPORTS}/tables"), patterns=["{name}.md"], caption="../report/tables.rst", category="Tables"
        ),
    params:
        cli=CRFBENCH,
        paper=lambda w: paper_tables(),
        results=lambda w, input: os.path.dirname(input.metrics),
        reports=lambda w, output: os.path.dirname(output[0]),
        notes={"profile": config.get("profile", ""), "notes": config["notes"], "config_digest": PROFILE_DIGEST},
    log:
        f"{RESULTS}/logs/report.log",
    resources:
        **cluster_resources(),
    run:
        write_json(output.notes, params.notes)
        shell(
            "{params.cli} report --results {params.results} --paper {params.paper:q} --notes {output.notes} "
            "--out {params.reports} --overwrite > {log} 2>&1"
        )

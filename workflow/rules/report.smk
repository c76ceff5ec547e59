# Gather the per-run tables into results/, then regenerate reports/ from results/ alone.

rule aggregate_metrics:
    input:
        run_files(schema.EVALUATION_FILE),
    output:
        results_file(schema.METRICS_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_metrics.log",
    shell:
        "{params.cli} aggregate {input} --out {output} > {log} 2>&1"


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
        "{params.cli} aggregate {input} --out {output} > {log} 2>&1"


rule aggregate_curves:
    input:
        run_files(schema.SUMMARY_FILE),
    output:
        results_file(schema.CURVES_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_curves.log",
    shell:
        "{params.cli} aggregate {input} --out {output} > {log} 2>&1"


rule aggregate_timing:
    input:
        [os.path.join(TIMING_DIR.format(dataset=d, encoder=e), schema.TIMING_FILE) for _, d, e in timed()]
        + device_timing_files(),
    output:
        results_file(schema.TIMING_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_timing.log",
    shell:
        "{params.cli} aggregate {input} --out {output} > {log} 2>&1"


rule report:
    # The profile's notes are written by the job that renders them: a separate job would be left
    # alone whenever its file exists, and the committed reference run showed a first profile's notes
    # for many runs after (2 seeds where the profile trains 3).
    input:
        metrics=results_file(schema.METRICS_TABLE),
        sentences=results_file(schema.SENTENCES_TABLE),
        curves=results_file(schema.CURVES_TABLE),
        sweep=lambda w: [rules.aggregate_sweep.output[0]] if swept() else [],
        timing=results_file(schema.TIMING_TABLE),
        agreement=results_file(schema.AGREEMENT_TABLE),
        scaling=lambda w: [rules.scaling_table.output[0]] if asv_result_files() else [],
        bethe=bethe_tables(),
        newton=newton_tables(),
        parse=parse_tables(),
    output:
        f"{REPORTS}/index.html",
        f"{REPORTS}/README.md",
        notes=results_file(schema.REPORT_NOTES),
    params:
        cli=CRFBENCH,
        paper=lambda w: os.path.join(data_dir(), "paper", "bcrf_tables.csv"),
        results=lambda w, input: os.path.dirname(input.metrics),
        reports=lambda w, output: os.path.dirname(output[0]),
        notes={"profile": config.get("profile", ""), "notes": config["notes"]},
    log:
        f"{RESULTS}/logs/report.log",
    run:
        write_json(output.notes, params.notes)
        shell(
            "{params.cli} report --results {params.results} --paper {params.paper:q} --notes {output.notes} "
            "--out {params.reports} > {log} 2>&1"
        )

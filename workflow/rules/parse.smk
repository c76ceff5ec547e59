# The SparseMAP paper's dependency parsers (crfbench parse ...), Table 1: for each (language, loss)
# the learning-rate grid's runs (one seed, `parsing.learning_rate`), the choice among them on dev
# UAS, every seed's run at the chosen rate, its evaluation (the MAP tree for every loss, SparseMAP's
# heaviest tree too for the SparseMAP losses), and the tables in results/parse/. A parser run is
# never resumed: an interrupted one retrains from the start; a changed setting rewrites its
# (language, loss)'s settings file, and the engine discards the old run (--restart-if-changed).


rule parse_settings:
    output:
        results_file(schema.PARSE_SETTINGS_FILE),
    params:
        settings=lambda w: parse_settings(w.language, w.loss),
    log:
        f"{RESULTS}/logs/parse/settings/{{language}}/{{loss}}.log",
    run:
        write_json(output[0], params.settings)


rule parse_grid_train:
    input:
        settings=results_file(schema.PARSE_SETTINGS_FILE),
    output:
        f"{PARSE_GRID_RUN}/{schema.SUMMARY_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
    log:
        f"{RESULTS}/logs/parse/lr/{{language}}/{{loss}}/seed{{seed}}/lr{{learning_rate}}.log",
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} parse train --config {input.settings} "
        "--seed {wildcards.seed} --learning-rate {wildcards.learning_rate} --run-dir {params.run_dir} "
        "--restart-if-changed > {log} 2>&1"


rule parse_choose_lr:
    input:
        lambda w: parse_grid_runs(w.language, w.loss),
    output:
        results_file(schema.PARSE_LEARNING_RATE_FILE),
    params:
        cli=CRFBENCH,
        run_dirs=lambda w, input: " ".join(os.path.dirname(path) for path in input),
    log:
        f"{RESULTS}/logs/parse/lr/{{language}}/{{loss}}/chosen.log",
    shell:
        "{params.cli} parse choose-lr --run-dirs {params.run_dirs} --out {output} > {log} 2>&1"


rule parse_train:
    input:
        settings=results_file(schema.PARSE_SETTINGS_FILE),
        learning_rate=lambda w: parse_learning_rate_file(w.language, w.loss),
    output:
        f"{PARSE_RUN}/{schema.SUMMARY_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
        learning_rate=lambda w, input: f"--learning-rate-from {input.learning_rate}" if input.learning_rate else "",
    log:
        f"{RESULTS}/logs/parse/train/{{language}}/{{loss}}/{{seed}}.log",
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} parse train --config {input.settings} "
        "--seed {wildcards.seed} {params.learning_rate} --run-dir {params.run_dir} "
        "--restart-if-changed > {log} 2>&1"


rule parse_evaluate:
    input:
        f"{PARSE_RUN}/{schema.SUMMARY_FILE}",
    output:
        metrics=f"{PARSE_RUN}/{schema.EVALUATION_FILE}",
        sentences=f"{PARSE_RUN}/{schema.SENTENCES_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output.metrics),
        data_dir=data_dir(),
    log:
        f"{RESULTS}/logs/parse/evaluate/{{language}}/{{loss}}/{{seed}}.log",
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} parse evaluate --run-dir {params.run_dir} > {log} 2>&1"


rule aggregate_parse:
    input:
        metrics=parse_run_files(schema.EVALUATION_FILE),
        sentences=parse_run_files(schema.SENTENCES_FILE),
        curves=parse_run_files(schema.SUMMARY_FILE),
    output:
        metrics=results_file(schema.PARSE_METRICS_TABLE),
        sentences=results_file(schema.PARSE_SENTENCES_TABLE),
        curves=results_file(schema.PARSE_CURVES_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/parse/aggregate.log",
    run:
        for name in ("metrics", "sentences", "curves"):
            shell(f"{{params.cli}} aggregate {{input.{name}}} --out {{output.{name}}} >> {{log}} 2>&1")

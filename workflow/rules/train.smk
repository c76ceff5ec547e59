# Train one (dataset, encoder, loss, seed). The engine checkpoints every epoch in the run folder,
# so a rerun after an interruption resumes; train.json appears only when training finished. When
# a setting of the run changed, Snakemake rewrites settings.json (its params changed) and the
# engine discards the old run (--restart-if-changed) instead of resuming it.


rule run_settings:
    output:
        f"{RUN_DIR}/{schema.SETTINGS_FILE}",
    params:
        settings=lambda w: run_settings(w.dataset, w.encoder, w.loss, w.seed),
    log:
        f"{RESULTS}/logs/settings/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.log",
    run:
        write_json(output[0], params.settings)


rule train:
    input:
        settings=f"{RUN_DIR}/{schema.SETTINGS_FILE}",
        data=results_file(schema.DATA_FACTS),
        features=lambda w: feature_manifest(w.dataset, w.encoder),
    output:
        f"{RUN_DIR}/{schema.SUMMARY_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
    log:
        f"{RESULTS}/logs/train/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.log",
    benchmark:
        f"{RESULTS}/logs/benchmarks/train/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.tsv"
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} train --config {input.settings} "
        "--run-dir {params.run_dir} --restart-if-changed --no-progress > {log} 2>&1"

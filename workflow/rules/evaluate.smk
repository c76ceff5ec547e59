# Decode the selected model's dev and test sets with every decoder of the config; the test set's
# per-sentence counts go beside the metrics (the claim ledger bootstraps over them).


rule evaluate:
    input:
        f"{RUN_DIR}/{schema.SUMMARY_FILE}",
    output:
        metrics=f"{RUN_DIR}/{schema.EVALUATION_FILE}",
        sentences=f"{RUN_DIR}/{schema.SENTENCES_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output.metrics),
        data_dir=data_dir(),
        decoders=lambda w: " ".join(evaluation_decoders(w.loss)),
        splits=" ".join(config["splits"]),
    log:
        f"{RESULTS}/logs/evaluate/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.log",
    benchmark:
        f"{RESULTS}/logs/benchmarks/evaluate/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.tsv"
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} evaluate --run-dir {params.run_dir} "
        "--decoders {params.decoders} --splits {params.splits} --no-progress > {log} 2>&1"

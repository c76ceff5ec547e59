# Decode the test set of each dataset's first-seed CRF-trained model with BCRF and mean field over
# their iteration counts, temperatures and penalties (crfbench.sweep); one table in results/.


rule sweep:
    input:
        f"{RUN_DIR}/{schema.SUMMARY_FILE}",
    output:
        f"{RUN_DIR}/{schema.SWEEP_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
        limit=f"--max-sentences {config['sweep_sentences']}" if "sweep_sentences" in config else "",
    log:
        f"{RESULTS}/logs/sweep/{{dataset}}/{{encoder}}/{{loss}}/{{seed}}.log",
    threads: config["threads"]
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} sweep --run-dir {params.run_dir} {params.limit} "
        "--no-progress > {log} 2>&1"


rule aggregate_sweep:
    input:
        [
            os.path.join(
                RUN_DIR.format(dataset=d, encoder=e, loss="crf", seed=config["seeds"][0]), schema.SWEEP_FILE
            )
            for d, e in swept()
        ],
    output:
        report(results_file(schema.SWEEP_TABLE), caption="../report/sweep.rst", category="Tables"),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/aggregate_sweep.log",
    shell:
        "{params.cli} aggregate {input} --out {output} --overwrite > {log} 2>&1"

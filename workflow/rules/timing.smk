# Time a training step per loss and decoding per decoder for one (dataset, encoder), on the
# experiment's first-seed CRF model (timing_network). A timing job takes every core so that
# nothing else runs beside it; the engine fixes torch's thread count. Timing jobs come last (lowest
# priority): run back to back, they leave a core idle once, not once each while a job drains.


rule timing_settings:
    output:
        f"{TIMING_DIR}/{schema.SETTINGS_FILE}",
    params:
        settings=lambda w: timing_settings(w.dataset, w.encoder),
    log:
        f"{RESULTS}/logs/settings/timing/{{dataset}}/{{encoder}}.log",
    run:
        write_json(output[0], params.settings)


rule time:
    input:
        settings=f"{TIMING_DIR}/{schema.SETTINGS_FILE}",
        data=results_file(schema.DATA_FACTS),
        network=lambda w: [f"{run}/{schema.SUMMARY_FILE}" for run in timing_network(w.dataset, w.encoder)],
    output:
        f"{TIMING_DIR}/{schema.TIMING_FILE}",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
        decoders=" ".join([*config["decoders"], *BASELINE_DECODERS]),  # Table 3's three baselines
        batches=config["timing"]["batches"],
        rounds=config["timing"]["rounds"],
        warmup=config["timing"]["warmup"],
        modes=" ".join(config["timing"]["modes"]),
        backends=" ".join(config["timing"]["backends"]),
        weights=lambda w: " ".join(f"--weights {run}" for run in timing_network(w.dataset, w.encoder)),
    log:
        f"{RESULTS}/logs/timing/{{dataset}}/{{encoder}}.log",
    benchmark:
        f"{RESULTS}/logs/benchmarks/timing/{{dataset}}/{{encoder}}.tsv"
    threads: alone_threads()
    priority: -1
    resources:
        gpu=config["gpus_per_job"],
        **cluster_resources(gpu=True, exclusive=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} time --config {input.settings} --run-dir {params.run_dir} "
        "--decoders {params.decoders} --batches {params.batches} --rounds {params.rounds} "
        "--warmup {params.warmup} --modes {params.modes} --backends {params.backends} {params.weights} --restart-if-changed --no-progress > {log} 2>&1"

# Time a training step per loss and decoding per decoder for one (dataset, encoder). A timing job
# takes every core so that nothing else runs beside it; the engine fixes torch's thread count.


rule timing_settings:
    output:
        f"{TIMING_DIR}/settings.json",
    params:
        settings=lambda w: timing_settings(w.dataset, w.encoder),
    log:
        f"{RESULTS}/logs/settings/timing/{{dataset}}/{{encoder}}.log",
    run:
        write_json(output[0], params.settings)


rule time:
    input:
        settings=f"{TIMING_DIR}/settings.json",
        data=f"{RESULTS}/data/{{dataset}}.json",
    output:
        f"{TIMING_DIR}/timing.csv",
    params:
        cli=CRFBENCH,
        run_dir=lambda w, output: os.path.dirname(output[0]),
        data_dir=data_dir(),
        decoders=" ".join(config["decoders"]),
        batches=config["timing"]["batches"],
        rounds=config["timing"]["rounds"],
        warmup=config["timing"]["warmup"],
    log:
        f"{RESULTS}/logs/timing/{{dataset}}/{{encoder}}.log",
    threads: workflow.cores
    resources:
        gpu=config["gpus_per_job"],
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} time --config {input.settings} --run-dir {params.run_dir} "
        "--decoders {params.decoders} --batches {params.batches} --rounds {params.rounds} "
        "--warmup {params.warmup} --restart-if-changed --no-progress > {log} 2>&1"

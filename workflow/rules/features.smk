# Frozen pretrained features (scorer encoder "frozen"): extracted once per (dataset, encoder)
# before its training jobs, into the cache folder its scorer names (feature_cache). The engine
# keys each split's file by model, weights, layers, pooling and tokens, so every loss and seed
# reuses it, and datasets with the same tokens (conll03-ner and its partial variant) share it;
# the manifest lists the files and the seconds each took.


rule features:
    input:
        settings=lambda w: feature_run_settings(w.dataset, w.encoder),
        data=results_file(schema.DATA_FACTS),
    output:
        FEATURE_MANIFEST,
    params:
        cli=CRFBENCH,
        data_dir=data_dir(),
    log:
        f"{RESULTS}/logs/features/{{dataset}}/{{encoder}}.log",
    threads: config["threads"]
    resources:
        **cluster_resources(),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} features --config {input.settings} "
        "--manifest {output} --no-progress > {log} 2>&1"

# Prepare data: check every corpus file against the checksum manifest (download a missing UD file
# where a network exists) and record the dataset's facts: sizes, protocol, file checksums.


rule prepare_data:
    output:
        results_file(schema.DATA_FACTS),
    params:
        cli=CRFBENCH,
        data_dir=data_dir(),
    log:
        f"{RESULTS}/logs/data/{{dataset}}.log",
    resources:
        **cluster_resources(),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} data {wildcards.dataset} --out {output} > {log} 2>&1"

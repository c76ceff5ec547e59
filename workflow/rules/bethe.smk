# The Bethe-projection paper's experiments (crfbench bethe ...), each a table in results/bethe/. The
# CGM experiment times two solvers on one thread each: like the timing jobs it takes every core, so
# that nothing runs beside it, and comes last.
rule bethe_cgm:
    output:
        results_file(schema.CGM_TABLE),
    params:
        cli=CRFBENCH,
        sizes=" ".join(BETHE.get("cgm", {}).get("sizes", [])),
        trials=BETHE.get("cgm", {}).get("trials", 10),
        beta=BETHE.get("cgm", {}).get("beta", 0),
    log:
        f"{RESULTS}/logs/bethe/cgm.log",
    threads: alone_threads()
    priority: -1
    resources:
        **cluster_resources(exclusive=True),
    shell:
        "{params.cli} bethe cgm --sizes {params.sizes} --trials {params.trials} --beta {params.beta} "
        "--out {output} --overwrite > {log} 2>&1"


rule bethe_ocr_fold:
    output:
        words=f"{OCR_FOLD}/{schema.OCR_FOLD_WORDS}",
        table=f"{OCR_FOLD}/{schema.OCR_FOLD_TABLE}",
    params:
        cli=CRFBENCH,
        data_dir=data_dir(),
        out_dir=lambda w, output: os.path.dirname(output.table),
        settings=bethe_settings("ocr"),
    log:
        f"{RESULTS}/logs/bethe/ocr/fold{{fold}}.log",
    threads: 1
    resources:
        **cluster_resources(),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} bethe ocr --fold {wildcards.fold} {params.settings} "
        "--out-dir {params.out_dir} > {log} 2>&1"


rule bethe_ocr:
    input:
        tables=ocr_folds(schema.OCR_FOLD_TABLE),
        words=ocr_folds(schema.OCR_FOLD_WORDS),
    output:
        table=results_file(schema.OCR_TABLE),
        words=results_file(schema.OCR_WORDS_TABLE),
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/bethe/ocr.log",
    shell:
        "({params.cli} aggregate {input.tables} --out {output.table} --overwrite && "
        "{params.cli} aggregate {input.words} --out {output.words} --overwrite) > {log} 2>&1"


rule bethe_citation_run:
    output:
        [f"{CITATION_RUN}/{citation_run_file(name)}" for name in CITATION_TABLES],
    params:
        cli=CRFBENCH,
        data_dir=data_dir(),
        out_dir=lambda w, output: os.path.dirname(output[0]),
        settings=bethe_settings("citation"),
    log:
        f"{RESULTS}/logs/bethe/citation/seed{{seed}}.log",
    threads: 1
    resources:
        **cluster_resources(),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} bethe citation --seed {wildcards.seed} "
        "{params.settings} --out-dir {params.out_dir} > {log} 2>&1"


rule bethe_citation:
    input:
        **{
            name: [f"{CITATION_RUN.format(seed=seed)}/{citation_run_file(name)}" for seed in config["seeds"]]
            for name in CITATION_TABLES
        },
    output:
        **{name: results_file(table) for name, table in CITATION_TABLES.items()},
    params:
        cli=CRFBENCH,
    log:
        f"{RESULTS}/logs/bethe/citation.log",
    run:
        for name in CITATION_TABLES:
            shell(f"{{params.cli}} aggregate {{input.{name}}} --out {{output.{name}}} --overwrite >> {{log}} 2>&1")

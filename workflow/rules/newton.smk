# The Newton-CRF study (crfbench newton ...), its tables in results/newton/. Both jobs time solvers
# or products on one thread: like the CGM job they take every core, so that nothing runs beside them,
# and come last.
rule newton_train:
    output:
        trace=results_file(schema.NEWTON_TRACE_TABLE),
        solvers=results_file(schema.NEWTON_SOLVERS_TABLE),
    params:
        cli=CRFBENCH,
        data_dir=data_dir(),
        out_dir=lambda w, output: os.path.dirname(output.solvers),
        settings=set_arguments(NEWTON.get("train", {}).get("settings", {})),
    log:
        f"{RESULTS}/logs/newton/train.log",
    threads: alone_threads()
    priority: -1
    resources:
        **cluster_resources(exclusive=True),
    shell:
        "CRFBENCH_DATA={params.data_dir:q} {params.cli} newton train {params.settings} "
        "--out-dir {params.out_dir} --overwrite > {log} 2>&1"


rule newton_cost:
    output:
        results_file(schema.NEWTON_COST_TABLE),
    params:
        cli=CRFBENCH,
        options=" ".join(f"--{name} {value}" for name, value in canonical(NEWTON.get("cost", {})).items()),
    log:
        f"{RESULTS}/logs/newton/cost.log",
    threads: alone_threads()
    priority: -1
    resources:
        **cluster_resources(exclusive=True),
    shell:
        "{params.cli} newton cost {params.options} --out {output} --overwrite > {log} 2>&1"

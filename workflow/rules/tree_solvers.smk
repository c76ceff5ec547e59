# The SparseMAP paper's solver comparison on random-potential trees (crfbench sparsemap trees), its
# table in results/sparsemap/. It times every solver's iterations on one thread: like the other
# timed studies it takes every core, so that nothing runs beside it, and comes last.
rule tree_solvers:
    output:
        results_file(schema.TREE_SOLVERS_TABLE),
    params:
        cli=CRFBENCH,
        options=" ".join(
            f"--{name.replace('_', '-')} {value}" for name, value in canonical(TREE_SOLVERS or {}).items()
        ),
    log:
        f"{RESULTS}/logs/sparsemap/tree-solvers.log",
    threads: alone_threads()
    resources:
        **cluster_resources(exclusive=True),
    priority: -1
    shell:
        "{params.cli} sparsemap trees {params.options} --out {output} --overwrite > {log} 2>&1"


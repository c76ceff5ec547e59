# The Bethe-projection paper's experiments (crfbench bethe ...), each a table in results/bethe/. The
# CGM experiment times two solvers on one thread each: like the timing jobs it takes every core, so
# that nothing runs beside it, and comes last.
BETHE = config.get("bethe", {})


def bethe_tables():
    """The result tables of the Bethe experiments the config asks for."""
    return [f"{RESULTS}/bethe/{name}.csv" for name in ("cgm",) if name in BETHE]


rule bethe_cgm:
    output:
        f"{RESULTS}/bethe/cgm.csv",
    params:
        cli=CRFBENCH,
        sizes=" ".join(BETHE.get("cgm", {}).get("sizes", [])),
        trials=BETHE.get("cgm", {}).get("trials", 10),
        beta=BETHE.get("cgm", {}).get("beta", 0),
    log:
        f"{RESULTS}/logs/bethe/cgm.log",
    threads: workflow.cores
    priority: -1
    shell:
        "{params.cli} bethe cgm --sizes {params.sizes} --trials {params.trials} --beta {params.beta} "
        "--out {output} > {log} 2>&1"

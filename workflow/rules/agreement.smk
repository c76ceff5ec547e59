# Numerical agreement of every method across backends and with the NumPy oracles.


rule agreement:
    output:
        csv=report(results_file(schema.AGREEMENT_TABLE), caption="../report/agreement.rst", category="Tables"),
        report=f"{REPORTS}/agreement.md",
    params:
        cli=CRFBENCH,
        grid="--quick" if config["agreement"]["grid"] == "quick" else "",
        backends=" ".join(config["agreement"]["backends"]),
    log:
        f"{RESULTS}/logs/agreement.log",
    resources:
        **cluster_resources(),
    shell:
        "{params.cli} agree {params.grid} --backends {params.backends} --csv {output.csv} --report {output.report} --overwrite > {log} 2>&1"

# The asv scaling suite's results (results/asv/, asv.conf.json's results_dir; written by `asv run`,
# see docs/benchmarks.md) tidied into results/scaling.csv for the report, and asv's own HTML with
# the full history published into reports/asv/. Nothing here runs a benchmark.
rule scaling_table:
    input:
        reference(asv_result_files(), made_by_a_rule=False),
        catalogue=reference(f"{ASV_RESULTS}/benchmarks.json", made_by_a_rule=False),
    output:
        report(results_file(schema.SCALING_TABLE), caption="../report/scaling.rst", category="Tables"),
    params:
        cli=CRFBENCH,
        asv=lambda w, input: os.path.dirname(input.catalogue),
    log:
        f"{RESULTS}/logs/scaling_table.log",
    shell:
        "{params.cli} scaling --asv {params.asv} --out {output} --overwrite > {log} 2>&1"


rule asv_html:
    input:
        reference(asv_result_files(), made_by_a_rule=False),
        catalogue=reference(f"{ASV_RESULTS}/benchmarks.json", made_by_a_rule=False),
    output:
        directory(f"{REPORTS}/asv"),
    params:
        python=shlex.quote(sys.executable),
    log:
        f"{RESULTS}/logs/asv_html.log",
    shell:
        "{params.python} -m asv publish --no-pull --html-dir {output:q} > {log} 2>&1"

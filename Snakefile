# crfbench pipeline entry point (snakemake --cores N).
#
# The rules (prepare data -> train -> evaluate -> time -> agreement -> aggregate -> report) land
# with the pipeline issue; until then the main job says so and succeeds, so the README's command
# is already the one users will run.

rule all:
    message:
        "crfbench: pipeline not built yet (the inference core is; see README.md)"
    shell:
        "echo 'crfbench: pipeline not built yet. The inference core is ready: python -m pytest tests/implementations'"

#!/usr/bin/env bash
# One GPU session on a lent machine (a CUDA GPU, its own Python with torch, JAX and Triton, no
# network): check the methods on the GPU, time Tables 2-3 on it, and run the asv scaling grid on
# it, the most telling points first, inside a fixed wall-clock budget. Everything it measures
# comes back as one tarball (results.tar) of the paths the repository keeps, to be unpacked at
# the repository root: results/asv/<machine>/ and results/gpu/<machine>/timing/<dataset>/L0/.
#
# It reads, from GPU_SESSION_DIR (default .gpu, ignored by git; made and checked beforehand by
# benchmarks/gpu_prepare.sh, which says what it holds), what the machine lacks: whl/ (asv, conllu,
# seqeval and their dependencies, as wheels), git/ (the commit's .git: asv needs its date) and, for
# the timing stage, data/ and runs/<dataset>/ (the treebanks, first-seed CRF models and settings)
# and writes to OUT (default ./gpu-out). Usage: benchmarks/gpu_session.sh MACHINE BUDGET_SECONDS COMMIT
# (COMMIT: the commit whose tree this is, as asv records it). GPU_SESSION_DRY_RUN=1 rehearses the
# whole session on a CPU in a minute or two (CI does, tests/workflow/test_gpu_session.py): nothing is
# installed (the current python3 runs), the timing stage times the synthetic task's first batches on
# the CPU (fresh network; the compiled mode takes the GPU's path, each step captured and replayed,
# by the CPU's stand-in recorder, crfbench.capture), and the asv stage runs torch's chunk at the
# `check` profile's one point on the CPU. STAGES (default "check capture timing asv") picks the
# stages to run, and PARTS (default "crossover torch jax roofline decode jax-loss others trees") the
# parts of the asv stage, each run in that order where named: a session that follows one which
# measured torch's grid can go straight to JAX's with PARTS="jax roofline jax-loss". A session
# shorter than the whole grid narrows it: TIMED_DATASETS (default "ud-pos-nl ud-seg-zh ud-pos-en")
# the timing stage's datasets, TIMING_SECONDS (default 240) each one's limit (a dataset cut off
# keeps the rounds it finished), TIMED_LOSSES, TIMED_DECODERS and TIMING_BATCHES (default every
# loss and decoder, 5 batches: each batch shape is captured apart) what it times, CROSSOVER_TAGS and
# CROSSOVER_BATCH (regular expressions, default every value) the crossover's T and B.
set -uo pipefail
MACHINE=${1:?machine name, e.g. nvidia-h200, as results/asv/ and the nightly workflow name the device}
BUDGET=${2:?wall-clock seconds}
COMMIT=${3:?the commit checked out}
START=$(date +%s)
DIR=${GPU_SESSION_DIR:-.gpu}
OUT=${OUT:-./gpu-out}
mkdir -p "$OUT"
LOG="$OUT/log.txt"
exec > >(tee -a "$LOG") 2>&1
left() { echo $((START + BUDGET - $(date +%s))); }
stage() { echo; echo "=== $* ($(left) s left) ==="; }
pack() {  # the tarball of everything measured so far, replaced atomically; not asv's benchmarks.json,
    # whose peers' thread counts are this machine's (the committed one describes the same benchmarks)
    local paths=()
    for path in "results/asv/$MACHINE" "results/gpu/$MACHINE"; do
        [ -e "$path" ] && paths+=("$path")
    done
    [ ${#paths[@]} -gt 0 ] && tar -cf "$OUT/results.tar.part" "${paths[@]}" && mv "$OUT/results.tar.part" "$OUT/results.tar"
}

DRY_RUN=${GPU_SESSION_DRY_RUN:-}
if [ -n "$DRY_RUN" ]; then
    ASV_DEVICE=cpu TIMING_DEVICE=cpu ASV_PROFILE=check LENGTHS=16
    TIMED_DATASETS=synthetic PARTS=${PARTS:-crossover torch}
    export CRFBENCH_CAPTURE=rerun  # the GPU's compiled path (CUDA graphs) with the CPU's stand-in
    export CRFBENCH_COMPILE_BACKEND=aot_eager  # anything still compiled: traced, nothing compiled
else
    ASV_DEVICE=gpu TIMING_DEVICE=cuda ASV_PROFILE=regular LENGTHS="1024 256 64 16"
    TIMED_DATASETS=${TIMED_DATASETS:-ud-pos-nl ud-seg-zh ud-pos-en}
fi
TIMING_SECONDS=${TIMING_SECONDS:-240}
CROSSOVER_TAGS=${CROSSOVER_TAGS:-[0-9]+} CROSSOVER_BATCH=${CROSSOVER_BATCH:-[0-9]+}

stage "machine"
if [ -n "$DRY_RUN" ]; then
    echo "dry run on the CPU: nothing installed, $(command -v python3)"
    export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
    python3 -c "import torch, jax, numpy; print('torch', torch.__version__); print('jax', jax.__version__, jax.devices()); print('numpy', numpy.__version__)"
else
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$DIR"/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
    python3 -c "import torch, jax, triton, numpy; print('torch', torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0)); print('jax', jax.__version__, jax.devices()); print('triton', triton.__version__, 'numpy', numpy.__version__)"
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
export ASV_PYTHONPATH=$PYTHONPATH  # asv drops PYTHONPATH from the processes it starts
if [ "$(git rev-parse HEAD 2>/dev/null)" != "$COMMIT" ]; then
    rm -rf .git && cp -r "$DIR/git" .git
    # the index from the commit (a --no-checkout clone's is empty, which git reads as every file
    # deleted: a dirty checkout, which the timing stage refuses); file modes as the copy left them
    git config core.fileMode false && git reset -q
fi
echo "commit $(git rev-parse HEAD) (expected $COMMIT)"; git status --short | head -5

STAGES=${STAGES:-check capture timing asv}
# The check's 20 tests outran 150 s on an H100 at d360734 (12 had passed), hence 240 s
[[ $STAGES == *check* ]] && stage "every method on the GPU against the CPU (float64)" && timeout 240 python3 -m pytest -v -p no:cacheprovider tests/implementations/test_cross_backend.py \
    -k "test_gpu_equals_cpu and (torch or [crf-jax] or [crf-scan-jax] or [bcrf-jax] or [meanfield-jax])" 2>&1 \
    | grep -E "PASSED|FAILED|ERROR|passed|failed"
[[ $STAGES == *capture* ]] && stage "every capture-safe method's training step and decoding capture as CUDA graphs" && timeout 150 python3 -m pytest -v -p no:cacheprovider tests/implementations/test_capture.py \
    tests/crfbench/test_captured_timing.py -k cuda 2>&1 | grep -E "PASSED|FAILED|ERROR|passed|failed"

# Eager and compiled (each batch shape's step captured as a CUDA graph and replayed; nothing is
# compiled, crfbench.capture): eager GPU timings measure kernel launches, and the ledger judges the
# compiled ones alone. Two warm-up rounds: the first captures every shape (a few eager calls and
# the capture), the second replays each once (a graph's first replay uploads it).
# Every baseline implementation is timed beside BCRF in the same process: the sequential forward
# algorithm and Viterbi (crf, viterbi), the parallel scan and pytorch-crf's.
[[ $STAGES == *timing* ]] && stage "Tables 2-3: a training step per loss and decoding per decoder, on $TIMING_DEVICE, eager and compiled"
for dataset in $TIMED_DATASETS; do
    [[ $STAGES == *timing* ]] || break
    [ -z "$DRY_RUN" ] && [ "$(left)" -lt $((TIMING_SECONDS / 2 + 60)) ] && { echo "skip $dataset: too little time left"; continue; }
    run_dir="results/gpu/$MACHINE/timing/$dataset/L0"
    mkdir -p "$run_dir"
    if [ -n "$DRY_RUN" ]; then  # a few items of each kind
        settings=(--set dataset=synthetic --set encoder_name=L0 --set batch_size=8)
        sizes=(--batches 1 --rounds 1 --warmup 1)
        items=(--losses pytorch-crf crf --decoders viterbi-scan)
    else
        settings=(--config "$DIR/runs/$dataset/timing-settings.json" --weights "$DIR/runs/$dataset")
        sizes=(--batches "${TIMING_BATCHES:-5}" --rounds 7 --warmup 2)
        # shellcheck disable=SC2206  # word lists
        items=(--losses ${TIMED_LOSSES:-crf crf-scan pytorch-crf bcrf meanfield unstructured}
            --decoders ${TIMED_DECODERS:-viterbi viterbi-scan viterbi-pytorch-crf bcrf-5 bcrf-10 meanfield-10 argmax})
    fi
    # The rehearsal times the working tree's uncommitted changes (tests/workflow/test_gpu_session.py);
    # a real session's results must name their commit, so a dirty checkout is refused there.
    dirty=()
    [ -n "$DRY_RUN" ] && dirty=(--allow-dirty)
    backends=(--backends torch)  # JAX compiles each batch shape's step afresh: one dataset's worth
    [ -z "$DRY_RUN" ] && [ "$dataset" = ud-pos-nl ] && backends=(--backends torch jax)
    CRFBENCH_DATA="$DIR/data" timeout "$TIMING_SECONDS" python3 -m crfbench time "${dirty[@]}" "${settings[@]}" "${sizes[@]}" "${items[@]}" "${backends[@]}" \
        --set device="$TIMING_DEVICE" --run-dir "$run_dir" --modes eager compiled --restart-if-changed --overwrite \
        --no-progress > "$OUT/timing-$dataset.log" 2>&1
    echo "exit $? ($(grep -c '^warm-up:' "$OUT/timing-$dataset.log") items warmed up): $(tail -1 "$OUT/timing-$dataset.log")"
    pack
done

[[ $STAGES == *asv* ]] || { pack; exit 0; }
stage "asv on the GPU"
python3 -m asv machine --machine "$MACHINE" --yes > /dev/null
# One asv invocation per chunk (asv saves a run's results only when it ends, and a chunk cut off by
# the budget is lost), in the order of what the issue asks: the paper's comparison (`crf` against
# `bcrf-10`) over every N for torch's marginals and loss (where IBP overtakes the forward algorithm,
# per T), then JAX's marginals, the roofline, decoding, JAX's loss, the other methods. Every
# combination runs in a fresh process that compiles afresh: a torch chunk of 16 took about a minute on
# an H200 at 6e8479b and 140-210 s on an H100 at d360734 (BCRF's projection compiled whole since
# df2cfe4); 16 JAX combinations did not finish in 300 s (H200), hence JAX's chunks of one length and
# two T.
asv_run() {  # asv_run REGEX [JAX_PLATFORMS]
    [ "$(left)" -lt 70 ] && { echo "skip $1: too little time left"; return; }
    echo "--- $1 ($(left) s left) ---"
    JAX_PLATFORMS=${2:-} timeout $(($(left) - 10)) python3 -m asv run --python=same \
        --set-commit-hash "$COMMIT" --machine "$MACHINE" --bench "$1" >> "$OUT/asv.log" 2>&1
    echo "asv exit $?; $(grep -c ' ok$' "$OUT/asv.log") ok, $(grep -c 'failed' "$OUT/asv.log") failed so far"
    # the machine's one history: environment py<X.Y>, as the nightly's runs (crfbench.asv_history)
    [ -d "results/asv/$MACHINE" ] && python3 -m crfbench.asv_history results/asv --machine "$MACHINE" \
        --python "$(python3 -c 'import sys; print(*sys.version_info[:2], sep=".")')"
    pack
}
chunk() {  # chunk BACKEND CLASS_REGEX METHOD_REGEX LENGTH_REGEX TAGS_REGEX [JAX_PLATFORMS]
    # torch compiled (CUDA graphs) and eager beside it; JAX is always jitted (mode compiled)
    asv_run "^bench_inference\.($2)\.time_[a-z_]+\('$1', '($3)', ($4), ($5), [0-9]+, '$ASV_DEVICE', '(compiled|eager)'\)$" "${6:-}"
}
crossover() {  # crossover BACKEND LENGTH_REGEX [JAX_PLATFORMS]: every method, operation, T and B
    asv_run "^bench_crossover\.Crossover\.time_crossover\('$1', '[a-z0-9-]+', '[a-z_]+', ($2), ($CROSSOVER_TAGS), ($CROSSOVER_BATCH), '$ASV_DEVICE'\)$" "${3:-}"
}
trees() {  # trees BACKEND LENGTH_REGEX [JAX_PLATFORMS]: bench_trees, every tree method, operation and B
    asv_run "^bench_trees\.Trees\.time_trees\('$1', '[a-z0-9-]+', '[a-z_]+', ($2), [0-9]+, '$ASV_DEVICE'\)$" "${3:-}"
}
export CRFBENCH_ASV_PROFILE=$ASV_PROFILE
PAPER='crf|bcrf-10'
EVERY='[0-9]+'
PARTS=" ${PARTS:-crossover torch jax roofline decode jax-loss others trees} "
part() { [[ $PARTS == *" $1 "* ]]; }  # part NAME: whether PARTS names it
# Where BCRF overtakes each baseline (the crossover figure), compiled, torch then JAX, smallest N
# first: the sequential baselines' loop over positions is unrolled when compiled, so a chunk's
# compilations grow with N (docs/benchmarks.md, the H200 session at ab57ee3), and the crossovers
# measured so far lie at N <= 256
ASCENDING=$(tr ' ' '\n' <<< "$LENGTHS" | sort -n | tr '\n' ' ')
part crossover && for length in $ASCENDING; do crossover torch "$length" cpu; done
part crossover && for length in $ASCENDING; do crossover jax "$length"; done
part torch && for length in $LENGTHS; do chunk torch 'Marginals|LossAndGrad' "$PAPER" "$length" "$EVERY" cpu; done
part jax && for length in $LENGTHS; do chunk jax Marginals "$PAPER" "$length" '32|128'; done
part roofline && asv_run "^bench_roofline\.(MemoryBandwidth\.\w+\('(torch|jax)', 'gpu'\)|IBPBandwidth\.\w+\('(torch|jax)', 'gpu', 256, 128, 8\))$"
part decode && chunk torch Decode "$PAPER" "${LENGTHS// /|}" "$EVERY" cpu
part jax-loss && for length in $LENGTHS; do chunk jax LossAndGrad "$PAPER" "$length" '32|128'; done
part others && chunk torch 'Marginals|LossAndGrad' 'crf-scan|meanfield-10' "${LENGTHS// /|}" "$EVERY" cpu
# The dependency-tree methods over the tree grid's N (8 to 128 words), torch then JAX, one chunk each
part trees && trees torch "$EVERY" cpu
part trees && trees jax "$EVERY"
stage "done"
pack
ls -la "$OUT"

#!/usr/bin/env bash
# Prepares GPU_SESSION_DIR (default .gpu, ignored by git) for benchmarks/gpu_session.sh, here,
# before a device session starts (the package registries are reachable here, not from the GPU
# machine), so that none of the session's device time goes on packaging:
#   whl/   asv 0.6.6, conllu and pytorch-crf 0.7.2 (the timed baseline; it declares no
#          dependency, torch is the image's) with every dependency pip resolves for the GPU image's
#          Python (GPU_PYTHON_VERSION, default 3.12; manylinux x86_64), less filelock and packaging,
#          which the image's torch and pytest bring (a copy first on PYTHONPATH would shadow theirs);
#          and seqeval, built as a wheel (PyPI has its sdist alone; its numpy and scikit-learn are
#          the image's)
#   git/   a shallow clone's .git at HEAD (asv reads the commit's date; the device tool carries no
#          .git)
#   data/, runs/<dataset>/   for the timing stage, where this checkout holds the pipeline's
#          reference run: each timed dataset's treebank, its first-seed CRF model and its timing
#          job's settings.json (as timing-settings.json); without them the session runs
#          STAGES="check asv"
# Then it checks the wheels as the session installs them (no index, no dependencies, into a
# scratch target), beside filelock and packaging, in a bare virtual environment of CHECK_PYTHON
# (default python3.12): asv must start and record a machine, conllu must import, pytorch-crf's module
# must be there (it imports the image's torch). Two sessions lost
# their asv stage to a hand-made list that missed a dependency (importlib_metadata 10 needs
# lazy_importer). Usage, from the repository root, on a committed tree, with a python3 that has
# pip (the project's .venv, say):
#   benchmarks/gpu_prepare.sh
# then on the device, with .gpu carried (docs/benchmarks.md, "On a lent GPU"):
#   STAGES=asv PARTS="jax roofline jax-loss" benchmarks/gpu_session.sh MACHINE SECONDS COMMIT
set -euo pipefail
DIR=${GPU_SESSION_DIR:-.gpu}
VERSION=${GPU_PYTHON_VERSION:-3.12}
CHECK_PYTHON=${CHECK_PYTHON:-python3.12}
PIP=(python3 -m pip)
DATASETS=(ud-pos-nl ud-seg-zh ud-pos-en)  # those the session times (gpu_session.sh, stage "timing")
IMAGE_HAS='^(filelock|packaging)-'  # wheels left out of whl/: the image's torch and pytest bring them

"$CHECK_PYTHON" -c "import sys; assert sys.version.startswith('$VERSION.'), sys.version" \
    || { echo "CHECK_PYTHON=$CHECK_PYTHON: set it to a Python $VERSION (the GPU image's)" >&2; exit 2; }
[ -z "$(git status --porcelain --untracked-files=no)" ] \
    || echo "warning: uncommitted changes; git/ holds HEAD, $(git rev-parse --short HEAD), without them" >&2

work=$(mktemp -d)
part="$DIR.part"  # renamed to DIR once whole; removed on any failure
trap 'rm -rf "$work" "$part"' EXIT
rm -rf "$part"
mkdir -p "$part/whl" "$work/all" "$work/image-whl"
install_wheels() {  # install_wheels TARGET WHEEL...: as the session does (gpu_session.sh, stage "machine")
    local target=$1
    shift
    "${PIP[@]}" install -q --disable-pip-version-check --no-index --no-deps --no-compile \
        --python-version "$VERSION" --only-binary=:all: --target "$target" "$@"
}

echo "=== wheels for Python $VERSION"
"${PIP[@]}" download -q --disable-pip-version-check --only-binary=:all: --implementation cp \
    --python-version "$VERSION" --abi "cp${VERSION/./}" --abi abi3 --abi none \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
    -d "$work/all" "asv==0.6.6" conllu "pytorch-crf==0.7.2"
"${PIP[@]}" wheel -q --disable-pip-version-check --no-deps -w "$work/all" "seqeval==1.2.2"
for wheel in "$work/all"/*.whl; do
    if [[ $(basename "$wheel") =~ $IMAGE_HAS ]]; then mv "$wheel" "$work/image-whl/"; else mv "$wheel" "$part/whl/"; fi
done
ls "$part/whl"

echo "=== the wheels as the session installs them, in a bare Python $VERSION"
"$CHECK_PYTHON" -m venv --without-pip "$work/venv"
install_wheels "$work/site" "$part"/whl/*.whl
install_wheels "$work/image" "$work/image-whl"/*.whl  # standing in for the image's own
(
    config="$PWD/asv.conf.json"
    cd "$work"
    export HOME="$work" PYTHONPATH="$work/site:$work/image"
    venv/bin/python -m asv machine --config "$config" --machine prepared --yes > /dev/null
    venv/bin/python -c "import asv, conllu; print('asv', asv.__version__, 'and conllu import; asv recorded a machine')"
    venv/bin/python -c "import importlib.util as u; assert u.find_spec('torchcrf'), 'no torchcrf'; print('torchcrf is there')"
)

echo "=== the commit, $(git rev-parse --short HEAD)"
git clone -q --depth 1 --no-checkout "file://$PWD" "$work/clone"
mv "$work/clone/.git" "$part/git"

echo "=== the timing stage's inputs"
data=${CRFBENCH_DATA:-../shared/data}
for dataset in "${DATASETS[@]}"; do
    model="results/runs/$dataset/L0/crf/0" settings="results/timing/$dataset/L0/settings.json"
    if [ ! -d "$model" ] || [ ! -f "$settings" ]; then
        echo "$dataset: no $model or $settings here (the default pipeline makes them); the session's timing stage cannot run it"
        continue
    fi
    # ud-<task>-<language> reads the language's treebank (crfbench.data.registry)
    treebank=$(python3 -c "import sys; from crfbench.data.ud import RELEASE, TREEBANKS; print(RELEASE + '/' + TREEBANKS[sys.argv[1].rsplit('-', 1)[1]].name)" "$dataset")
    mkdir -p "$part/data/$(dirname "$treebank")" "$part/runs/$dataset"
    cp -r "$data/$treebank" "$part/data/$treebank"
    cp -r "$model/." "$part/runs/$dataset/"
    cp "$settings" "$part/runs/$dataset/timing-settings.json"
    echo "$dataset: treebank, model and settings"
done

rm -rf "$DIR"
mv "$part" "$DIR"
size=$(du -sm "$DIR" | cut -f1)
echo "=== $DIR: $size MiB (the device tool carries 64 MiB at most)"
[ "$size" -le 64 ] || { echo "$DIR is over 64 MiB" >&2; exit 1; }
echo "then, on the device with $DIR carried: benchmarks/gpu_session.sh MACHINE SECONDS $(git rev-parse HEAD)"

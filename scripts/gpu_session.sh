#!/usr/bin/env bash
# One GPU-machine session: build, test, sanitize, benchmark; logs under $OUT (or ./out).
#   bash scripts/gpu_session.sh [stage ...]     stages: ort build trt test sanitize bench demo (default: all)
#
# Expects (carried with the call, never committed):
#   .gpu-deps/deps.tar.gz         third-party headers (a tarball of .deps/)
#   /tmp/ortparts/*.part* + SHA256  onnxruntime-gpu wheel in parts (stage "ort"; optional)
#   .trt/11/include               TensorRT headers for the plugin contract test (stage "trt"; optional)
# The machine has no network: pip installs use --no-build-isolation --no-deps.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
export TRT_FASTOPS_CUDA_ARCHS=${TRT_FASTOPS_CUDA_ARCHS:-90a}
PY=${PYTHON:-python3}
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(ort build trt test sanitize bench demo)
has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
status=0
step() { echo; echo "=== $* ($(date +%T))"; }

if [ -d /tmp/ortgpu ]; then export PYTHONPATH=/tmp/ortgpu${PYTHONPATH:+:$PYTHONPATH}; fi

if has ort && [ ! -d /tmp/ortgpu ]; then
  step "onnxruntime-gpu from carried parts"
  mkdir -p /tmp/ortparts && cp .gpu-wheels/* /tmp/ortparts/ 2>/dev/null
  if [ -f /tmp/ortparts/SHA256 ]; then
    (cd /tmp/ortparts && whl=$(awk '{print $2}' SHA256) && cat "$whl".part* > "$whl" && sha256sum -c SHA256 &&
      $PY -m pip install -q --no-deps --no-index --target /tmp/ortgpu "$whl") && export PYTHONPATH=/tmp/ortgpu${PYTHONPATH:+:$PYTHONPATH} \
      || { echo "onnxruntime-gpu install FAILED"; status=1; }
  else
    echo "no onnxruntime-gpu parts carried: ORT CUDA tests will skip"
  fi
fi

if has build; then
  step "headers + build"
  mkdir -p .deps && tar -C .deps -xzf .gpu-deps/deps.tar.gz || { echo "no header tarball"; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
  # The wheel's build directory (pyproject's build-dir) from an earlier call on this machine looks
  # up to date: the copied tree keeps its files' times, so stale objects would be installed.
  rm -rf build/cp*
  $PY -m pip install --no-build-isolation --no-deps -v . > "$OUT/build.txt" 2>&1 \
    || { tail -60 "$OUT/build.txt"; echo "BUILD FAILED"; exit 1; }
  grep -E "warning|spill|ptxas info" "$OUT/build.txt" | grep -v "^--" | tail -40
  (cd /tmp && $PY -m trt_fastops info) | tee -a "$OUT/gpu.txt"
fi

if has trt; then
  step "TensorRT plugin contract test (headers only; no TensorRT runtime exists here)"
  if [ -f .trt/11/include/NvInfer.h ]; then
    cmake -S . -B build/trt -G Ninja -DTRT_FASTOPS_CUDA_ARCHS="$TRT_FASTOPS_CUDA_ARCHS" \
      -DTRT_FASTOPS_TRT_INCLUDE="$PWD/.trt/11/include" -DTRT_FASTOPS_BUILD_TRT_TESTS=ON \
      -DTRT_FASTOPS_BUILD_PYTHON=OFF > "$OUT/trt_build.txt" 2>&1 &&
      cmake --build build/trt --target trt_fastops_trt_contract_test >> "$OUT/trt_build.txt" 2>&1 \
      && export TRT_FASTOPS_TRT_CONTRACT_TEST=$PWD/build/trt/tests/trt/trt_fastops_trt_contract_test \
      || { tail -30 "$OUT/trt_build.txt"; echo "TRT contract test build FAILED"; status=1; }
  else
    echo "no TensorRT headers carried (.trt/11/include): contract test skipped"
  fi
fi

if has test; then
  step "pytest (all tests, GPU included)"
  PYTHONSAFEPATH=1 $PY -m pytest -p no:cacheprovider -q -rs tests --junitxml="$OUT/junit.xml" \
    2>&1 | tee "$OUT/pytest.txt" | tail -40
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi

if has sanitize; then
  step "compute-sanitizer on our kernels"
  : > "$OUT/sanitizer.txt"
  # racecheck on the attention script instruments our kernels only (--kernel-name kns=trt_fastops:
  # every kernel we ship is in namespace trt_fastops, tests/test_kernel_namespace.py). Over the
  # torch reference kernels it compares against, racecheck took minutes a persistent case and did
  # not finish the longest in 280 s (session 53); filtered, all nine paths take ~2 minutes. A
  # deliberately racy kernel showed that the filter instruments what it names. The other scripts
  # run unfiltered: with a filter, Dense's cuBLASLt fallback stopped on "Internal Sanitizer Error:
  # ... failed to handle a hardware exception", where unfiltered racecheck and memcheck are clean
  # (bench/NOTES-attention-log.md item 94).
  # SANITIZE_TOOLS picks the tools (default: all four).
  for script in scripts/sanitize_*.py; do
    for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do
      only=()
      [ $tool = racecheck ] && [ "$script" = scripts/sanitize_attention.py ] && only=(--kernel-name kns=trt_fastops)
      echo "--- $script $tool" | tee -a "$OUT/sanitizer.txt"
      PYTHONSAFEPATH=1 compute-sanitizer --tool $tool "${only[@]}" --error-exitcode 3 --target-processes all \
        $PY "$script" >> "$OUT/sanitizer.txt" 2>&1
      rc=$?; echo "$script $tool exit $rc" | tee -a "$OUT/sanitizer.txt"
      [ $rc = 0 ] || status=1
    done
  done
  # The plugins as TensorRT enqueues them, cuDNN included (its engines write into our buffers:
  # an FFT engine once wrote past a ConvTranspose's y while autotuning timed it).
  if [ -n "${TRT_FASTOPS_TRT_CONTRACT_TEST:-}" ]; then
    echo "--- trt contract memcheck" | tee -a "$OUT/sanitizer.txt"
    compute-sanitizer --tool memcheck --error-exitcode 3 "$TRT_FASTOPS_TRT_CONTRACT_TEST" --require-gpu \
      >> "$OUT/sanitizer.txt" 2>&1
    rc=$?; echo "trt contract memcheck exit $rc" | tee -a "$OUT/sanitizer.txt"
    [ $rc = 0 ] || status=1
  fi
  grep -E "ERROR SUMMARY|errors|hazard" "$OUT/sanitizer.txt" | tail -12
fi

if has bench; then
  step "benchmarks"
  for b in scripts/bench_*.py; do
    PYTHONSAFEPATH=1 $PY "$b" 2>&1 | tee "$OUT/$(basename "$b" .py).txt" | tail -30
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
  cp bench/results/*.json "$OUT/" 2>/dev/null
fi

if has demo; then
  step "demo"
  PIP_FLAGS="--no-build-isolation --no-deps" bash scripts/demo.sh > "$OUT/demo.txt" 2>&1 || status=1
  grep -v "^  " "$OUT/demo.txt" | tail -5; sed -n '/== rewrite/,$p' "$OUT/demo.txt" | tail -40
fi

echo; echo "gpu_session status $status"
exit $status

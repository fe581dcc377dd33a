#!/usr/bin/env bash
# Builds FlashAttention-3's Hopper forward (Dao-AILab/flash-attention, hopper/) for
# bench_attention's `--fa3` baseline: its own instantiations for head dims 64, 128 and 256,
# float16 and bfloat16, dense inputs only (no varlen, paging, split, softcap, GQA packing,
# local windows, fp8 or backward), behind bench/fa3/fa3_harness.cu's C entry point.
# FA3's sources are fetched, never committed; CUTLASS comes from .deps (scripts/setup_deps.py).
#
#   bash scripts/build_fa3.sh FLASH_ATTENTION_CHECKOUT [OUT_DIR]     (default OUT_DIR: bench/fa3/build)
#   (FA3_COMMIT=<sha> names the commit of a checkout without .git, such as a git archive)
#   python3 scripts/bench_attention.py --fa3 bench/fa3/build/libfa3_bench.so
#
# Compiles for sm_90a only (no GPU needed); about a minute per instantiation file.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
src=${1:?usage: build_fa3.sh FLASH_ATTENTION_CHECKOUT [OUT_DIR]}
hopper="$src/hopper"
out=${2:-$root/bench/fa3/build}
[ -f "$hopper/flash_fwd_launch_template.h" ] || { echo "build_fa3: no hopper/flash_fwd_launch_template.h under $src" >&2; exit 2; }
cutlass=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cutlass'])" "$root/.deps/paths.json" 2>/dev/null) \
  || { echo "build_fa3: no CUTLASS headers; run python3 scripts/setup_deps.py first" >&2; exit 2; }
mkdir -p "$out/obj"
# FA3's setup.py flags for sm_90a, and its switches for the features this baseline leaves out.
flags=(-O3 -std=c++17 --use_fast_math --expt-relaxed-constexpr -Xcompiler -fPIC
       -gencode arch=compute_90a,code=sm_90a
       -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90 -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG
       -DFLASHATTENTION_DISABLE_LOCAL -DFLASHATTENTION_DISABLE_VARLEN -DFLASHATTENTION_DISABLE_APPENDKV
       -DFLASHATTENTION_DISABLE_SPLIT -DFLASHATTENTION_DISABLE_PAGEDKV -DFLASHATTENTION_DISABLE_SOFTCAP
       -DFLASHATTENTION_DISABLE_PACKGQA -DFLASHATTENTION_DISABLE_FP8 -DFLASHATTENTION_DISABLE_SM8x
       -DFLASHATTENTION_DISABLE_BACKWARD
       -I"$hopper" -I"$cutlass")
sources=("$hopper"/instantiations/flash_fwd_hdim{64,128,256}_{fp16,bf16}_sm90.cu "$hopper/flash_prepare_scheduler.cu"
         "$root/bench/fa3/fa3_harness.cu")
jobs=${BUILD_FA3_JOBS:-$(nproc)}
objs=()
for s in "${sources[@]}"; do
  o="$out/obj/$(basename "${s%.cu}").o"
  objs+=("$o")
  # One nvcc per source, at most $jobs at once.
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  echo "nvcc $(basename "$s")"
  rm -f "$o"  # a failed compile leaves no object behind for the link to take
  nvcc "${flags[@]}" -c "$s" -o "$o" &
done
wait
for o in "${objs[@]}"; do [ -f "$o" ] || { echo "build_fa3: $(basename "$o") failed to compile" >&2; exit 1; }; done
nvcc -shared -o "$out/libfa3_bench.so" "${objs[@]}"
# The commit built: the checkout's, or FA3_COMMIT for an exported tree (git archive).
(cd "$src" && git rev-parse HEAD 2>/dev/null || echo "${FA3_COMMIT:-unknown}") > "$out/FA3_COMMIT"
echo "wrote $out/libfa3_bench.so (FlashAttention-3 at $(cat "$out/FA3_COMMIT"))"

#!/bin/bash
# A/B of the causal tail table: one build; the default against -5 (the same kernels without the
# table) on grids that take it (the model saves >= TAIL_GAIN_MIN, 5 %: bench/NOTES-attention-log.md
# item 104 (f)) and one that doesn't (1x32x4096 d128: both arms run the snake); tests; sanitizers on
# the tail cases. Carry: [".gpu-deps"]; run: bash bench/ab_lpt_tail.sh
set -uo pipefail
OUT=${OUT:-$PWD/out/run}; mkdir -p "$OUT"; export OUT PYTHONSAFEPATH=1
start=$(date +%s); deadline=${1:-580}
left() { echo $(( deadline - ($(date +%s) - start) )); }
if ! (cd /tmp && python3 -c "import trt_fastops._C" 2>/dev/null); then
  bash scripts/gpu_session.sh build > "$OUT/build_log.txt" 2>&1; echo "build rc=$? left $(left)"
  grep -E "spill stores" "$OUT/build.txt" | grep -v " 0 bytes spill stores" | sort | uniq -c | head -3
fi
timeout 150 python3 scripts/tune_attention.py --graph --clocks --causal yes --dtypes float16 bfloat16 \
  --shapes 1x96x1024x64 8x12x1024x64 2x32x2048x64 1x40x2048x128 2x40x4096x128 1x32x4096x128 \
  --schedules -1 -5 --trials 5 > "$OUT/tune_tail.txt" 2>&1
echo "tune rc=$? left $(left)"; grep -v "^ *{" "$OUT/tune_tail.txt" | tail -12
python3 - "$OUT/tune_tail.txt" <<'PY'
import re, sys, math
r = []
for line in open(sys.argv[1]):
    m = re.findall(r"auto/v0/s(-?\d+)=([\d.]+)TF", line)
    if len(m) == 2: r.append(float(m[0][1]) / float(m[1][1]))
print("tail / -5: geomean %.4f, %d of %d faster" % (math.exp(sum(map(math.log, r)) / len(r)), sum(x > 1 for x in r), len(r)))
PY
timeout $(( $(left) - 120 )) python3 -m pytest -q -p no:cacheprovider -x tests/gpu/test_attention_kernels.py -k "tail or drawn or schedules or sections" > "$OUT/pytest_b.txt" 2>&1
echo "pytest rc=$? left $(left): $(tail -1 "$OUT/pytest_b.txt")"; grep -E "^FAILED|^ERROR" "$OUT/pytest_b.txt" | head -5
for tool in memcheck synccheck racecheck; do
  filt=(); [ $tool = racecheck ] && filt=(--kernel-name kns=trt_fastops)
  t0=$(date +%s)
  timeout $(( $(left) / 2 > 40 ? 40 : $(left) / 2 )) compute-sanitizer --tool $tool "${filt[@]}" --error-exitcode 3 python3 scripts/sanitize_attention.py \
    --paths auto --cases tail-d128-causal,tail-d64-causal > "$OUT/san_$tool.txt" 2>&1
  echo "$tool rc=$? $(( $(date +%s) - t0 )) s; ok $(grep -c ': ok' "$OUT/san_$tool.txt") / $(grep -c 'MISMATCH' "$OUT/san_$tool.txt") mismatch; $(grep -E 'SUMMARY' "$OUT/san_$tool.txt" | tail -1)"
done

"""The flash-attention kernel (plugins/attention) through trt_fastops.ops.attention,
against a float64 reference on random inputs.

Error bound, as flash-attention's own tests: our error against float64 must stay
within twice the error of a naive same-precision implementation (QK^T rounded to
the input dtype, softmax in float32, P rounded, P V) plus a small absolute slack.
Outputs are poisoned with NaN before every call; every call is followed by a
synchronize so asynchronous CUDA errors surface in the test that caused them.
"""
from __future__ import annotations

import contextlib
import math

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

if not torch.cuda.is_available():  # pragma: no cover - depends on the machine
    pytest.skip("no CUDA device", allow_module_level=True)

from trt_fastops import _C, ops  # noqa: E402

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


# auto with d64's rows per tile forced (attention_set_tile_variant; HopperTiles<64> in
# attention_hopper.cu): 64 rows (one consumer, two CTAs per SM), 128 (two consumers), 192 (three),
# 256 (four, 64-key blocks; unmasked inputs without softcap, the others as for 192) or 192 over the
# heads' rows end to end ('auto-packed', PACK_HEADS: non-causal unmasked inputs without softcap whose
# heads are a multiple of 64 rows, at least 128 and not a multiple of 192; the others as auto).
TILE_PATHS = {"auto-m64": 3, "auto-m128": 1, "auto-m192": 2, "auto-m256": 4, "auto-packed": 6}
# auto with the warp-specialised kernel's output stored by its consumers (attention_set_output_store)
# instead of TMA stores from a producer warp.
STORE_PATHS = {"auto-consumer-store": "consumers"}
AUTO_PATHS = ("auto", *TILE_PATHS, *STORE_PATHS)


@contextlib.contextmanager
def native_setting(setter: str, value):
    """_C.<setter>(value) (a process-wide attention hook that returns the previous setting) for the
    block, the previous setting restored after it."""
    set_ = getattr(ops._native(), setter)
    previous = set_(value)
    try:
        yield
    finally:
        set_(previous)


def forced_schedule(section_mib: int):
    """attention_set_schedule(section_mib) for the block, the previous schedule restored after it."""
    return native_setting("attention_set_schedule", section_mib)


def set_kernel_path(name: str) -> tuple[str, int, str]:
    """Selects a kernel path ('auto', 'wgmma', 'sm80' or a TILE_PATHS / STORE_PATHS key); returns
    the previous (path, tile variant, output store)."""
    native = ops._native()
    path = "auto" if name in AUTO_PATHS else name
    return (native.attention_set_path(path), native.attention_set_tile_variant(TILE_PATHS.get(name, 0)),
            native.attention_set_output_store(STORE_PATHS.get(name, "auto")))


@pytest.fixture(autouse=True, params=[*AUTO_PATHS, "wgmma", "sm80"])
def kernel_path(request):
    """Every test runs on each kernel family: 'auto' (on an H100 with an sm_90a build: the
    warp-specialised TMA kernel, or the plain wgmma kernel where it can't run), 'auto-m64' /
    'auto-m128' / 'auto-m192' / 'auto-m256' / 'auto-packed' (the same with d64's rows per tile forced: short grids
    otherwise take 64 rows, so the others' key-padding paths, the packed mask of the 192-row tile
    and the unpacked one of the 128-row tile, run here; masks that are not key padding take 128
    rows; the four-consumer 256-row tile takes unmasked inputs without softcap; at d128 'auto-m192'
    forces tile variant 2, the 176-key tile, on every input, and 'auto-m256' variant 4, that tile in
    two-CTA clusters where a head's 128-row query tiles are whole and even, else unclustered; at
    d256 'auto-m128' forces variant 1, the plain wgmma config, on unmasked inputs, 'auto-m192'
    variant 2, the 80-key tile, on unmasked inputs without softcap and on key-padding masks, and
    the others take the warp-specialised tiles by the keys' count, key-padding masks alike),
    'auto-consumer-store' (the same with the output stored by the consumer warps, the kernel's
    fallback where the output has no tensor map), 'wgmma' (the plain wgmma kernel forced) and
    'sm80' (the mma.sync kernel forced)."""
    previous_path, previous_variant, previous_store = set_kernel_path(request.param)
    yield request.param
    ops._native().attention_set_output_store(previous_store)
    ops._native().attention_set_tile_variant(previous_variant)
    ops._native().attention_set_path(previous_path)


def _forward_raw(q, k, v, out, **kw):
    """_C.attention_forward on [B, H, S, D] views q, k, v, out (pointers, sizes and strides from the
    tensors); kw: its other arguments."""
    b, hq, sq, d = q.shape
    st = lambda t: (t.stride(0), t.stride(1), t.stride(2))  # noqa: E731
    return ops._native().attention_forward(
        "float16" if q.dtype == torch.float16 else "bfloat16", int(q.data_ptr()), int(k.data_ptr()),
        int(v.data_ptr()), int(out.data_ptr()), b, hq, k.shape[1], sq, k.shape[2], d, v.shape[3],
        q_strides=st(q), k_strides=st(k), v_strides=st(v), out_strides=st(out), **kw)


def _kernel_name(q, k, v, **kw):
    return _forward_raw(q, k, v, q, scale=0.1, dry_run=True, **kw)


ATOL = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _allowed(sq, skv, causal, offset, device):
    i = torch.arange(sq, device=device).view(sq, 1)
    j = torch.arange(skv, device=device).view(1, skv)
    return (j <= i + offset) if causal else torch.ones(sq, skv, dtype=torch.bool, device=device)


def _padded_mask(mask, skv):
    """The mask padded to skv keys as ONNX does (False / -inf)."""
    if mask is None or mask.shape[-1] == skv:
        return mask
    pad = skv - mask.shape[-1]
    fill = torch.zeros if mask.dtype == torch.bool else (lambda *s, **kw: torch.full(s, -math.inf, **kw))
    extra = fill(*mask.shape[:-1], pad, dtype=mask.dtype, device=mask.device)
    return torch.cat([mask, extra], dim=-1)


def reference(q, k, v, *, mask=None, causal=False, causal_offset=0, scale=None, softcap=0.0,
              compute_dtype=torch.float64, rows_per_chunk=2048):
    """[B, H, S, D] tensors -> (out in compute_dtype, lse float64). compute_dtype float64 is the
    exact reference; the input dtype gives the naive same-precision implementation."""
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    group = hq // hkv
    kk = k.repeat_interleave(group, dim=1).to(compute_dtype)
    vv = v.repeat_interleave(group, dim=1).to(compute_dtype)
    mask = _padded_mask(mask, skv)
    if mask is not None:
        mask = mask.reshape([1] * (4 - mask.dim()) + list(mask.shape)).expand(b, hq, sq, skv)
    outs, lses = [], []
    for r0 in range(0, sq, rows_per_chunk):
        r1 = min(sq, r0 + rows_per_chunk)
        qq = q[:, :, r0:r1].to(compute_dtype)
        s = torch.matmul(qq, kk.transpose(-1, -2))
        low = compute_dtype != torch.float64
        s = (s * scale).float() if low else s * scale
        if softcap > 0:
            s = softcap * torch.tanh(s / softcap)
        allowed = _allowed(sq, skv, causal, causal_offset, q.device)[r0:r1].expand(b, hq, r1 - r0, skv)
        if mask is not None:
            m = mask[:, :, r0:r1]
            if m.dtype == torch.bool:
                allowed = allowed & m
            else:
                s = s + m.to(s.dtype)
        s = s.masked_fill(~allowed, -math.inf)
        row_max = s.amax(-1, keepdim=True)
        fully = torch.isneginf(row_max)
        p = torch.exp(s - torch.where(fully, torch.zeros_like(row_max), row_max))
        l = p.sum(-1, keepdim=True)
        p = p / torch.where(l == 0, torch.ones_like(l), l)
        if low:
            p = p.to(compute_dtype)
        outs.append(torch.matmul(p, vv))
        lses.append((torch.log(l.double()) + row_max.double()).squeeze(-1))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def make_inputs(b, hq, hkv, sq, skv, d, dv, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(b, hq, sq, d, device="cuda", generator=g).to(dtype)
    k = torch.randn(b, hkv, skv, d, device="cuda", generator=g).to(dtype)
    v = torch.randn(b, hkv, skv, dv, device="cuda", generator=g).to(dtype)
    return q, k, v


def check(q, k, v, *, layout="bhsd", q4=None, k4=None, v4=None, check_lse=True, compare_naive=True, **kw):
    """Runs ops.attention on (q, k, v) in `layout`; q4/k4/v4 are the same tensors as [B, H, S, D].
    compare_naive=False: a fixed bound (4 * ATOL) instead of one relative to the naive 16-bit
    implementation (scripts/sanitize_attention.py: initcheck cannot see cuBLAS's TMA stores)."""
    q4 = q if q4 is None else q4
    k4 = k if k4 is None else k4
    v4 = v if v4 is None else v4
    out_shape = list(q.shape[:3]) + [v.shape[3]]
    out = torch.full(out_shape, math.nan, dtype=q.dtype, device=q.device)
    got, lse = ops.attention(q, k, v, layout=layout, out=out, return_lse=True, **kw)
    torch.cuda.synchronize()
    assert got.data_ptr() == out.data_ptr()
    if layout == "bshd":
        got = got.transpose(1, 2)
    exact, exact_lse = reference(q4, k4, v4, **kw)
    assert not torch.isnan(got).any(), "NaN in the output (poisoned or computed)"
    err = (got.double() - exact).abs().max().item()
    if compare_naive:
        naive, _ = reference(q4, k4, v4, compute_dtype=q.dtype, **kw)
        naive_err = (naive.double() - exact).abs().max().item()
        bound = 2 * naive_err + ATOL[q.dtype]
    else:
        naive_err, bound = math.nan, 4 * ATOL[q.dtype]
    assert err <= bound, f"max error {err:.3g} > bound {bound:.3g} (naive same-precision error {naive_err:.3g})"
    if check_lse:
        finite = torch.isfinite(exact_lse)
        assert torch.equal(torch.isneginf(lse), ~finite), "lse must be -inf exactly for fully masked rows"
        if finite.any():
            lerr = (lse.double()[finite] - exact_lse[finite]).abs().max().item()
            assert lerr <= 1e-3 * max(1.0, exact_lse[finite].abs().max().item()), f"lse error {lerr:.3g}"
    return got


# ---------------------------------------------------------------------------
# Shapes: every head-dim bucket, causal or not, square / unequal / tiny sequences,
# MHA and GQA.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("sq,skv", [(128, 128), (200, 333), (333, 200), (1, 77), (1000, 1000), (65, 4097)])
@pytest.mark.parametrize("hq,hkv", [(4, 4), (8, 2)], ids=["mha", "gqa"])
def test_shapes(dtype, d, causal, sq, skv, hq, hkv):
    q, k, v = make_inputs(2, hq, hkv, sq, skv, d, d, DTYPES[dtype], seed=sq * 7 + skv)
    check(q, k, v, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [8, 16, 32, 40, 72, 80, 96, 100, 160, 192, 200, 250, 255])
def test_head_dims(dtype, d):
    q, k, v = make_inputs(2, 3, 3, 257, 257, d, d, DTYPES[dtype], seed=d)
    check(q, k, v, causal=d % 2 == 0)


@pytest.mark.parametrize("d,dv", [(64, 128), (128, 64), (96, 32), (256, 64), (40, 200)])
def test_value_head_dim(d, dv):
    q, k, v = make_inputs(2, 4, 2, 150, 190, d, dv, torch.float16, seed=d + dv)
    check(q, k, v)


@pytest.mark.parametrize("hq,hkv", [(16, 1), (12, 3), (6, 6)])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_heads(hq, hkv, causal):
    q, k, v = make_inputs(3, hq, hkv, 130, 130, 64, 64, torch.bfloat16, seed=hq)
    check(q, k, v, causal=causal)


# ---------------------------------------------------------------------------
# Causal alignment: offset 0 (top-left, ONNX without past keys), bottom-right
# (skv - sq, ONNX with past keys), negative (leading rows fully masked).
# d64's 192-row tiles: consumers whose rows see fewer key blocks than the tile's, or none.
@pytest.mark.parametrize("sq,skv,offset", [(100, 300, 0), (100, 300, 200), (300, 100, -200), (64, 64, -10),
                                           (1, 513, 512), (129, 1000, 871), (700, 700, -130)])
@pytest.mark.parametrize("d", [64, 128])
def test_causal_offset(sq, skv, offset, d):
    q, k, v = make_inputs(2, 4, 4, sq, skv, d, d, torch.float16, seed=sq + skv)
    check(q, k, v, causal=True, causal_offset=offset)


# A d64 consumer's last 128-key block whose second half none of its rows sees runs its softmax
# and P V on the first 64 keys only: the last visible key at 63 / 64 of that block (non-causal:
# the keys' end; causal: the diagonal moved by the offset), and a whole-block neighbour. d128
# (no narrow blocks) checks the same boundaries.
@pytest.mark.parametrize("sq,skv,causal,offset", [(256, 300, False, 0), (256, 320, False, 0), (256, 321, False, 0),
                                                  (384, 384, True, 0), (384, 384, True, 63), (384, 384, True, 64),
                                                  (384, 384, True, -1), (200, 520, True, 320)])
@pytest.mark.parametrize("d,dtype", [(64, "float16"), (128, "bfloat16")])
def test_narrow_last_block(sq, skv, causal, offset, d, dtype):
    q, k, v = make_inputs(2, 4, 2, sq, skv, d, d, DTYPES[dtype], seed=sq + skv + offset)
    check(q, k, v, causal=causal, causal_offset=offset)


# ---------------------------------------------------------------------------
# Masks: every broadcast form, bool and additive, short masks, fully masked rows.
MASK_SHAPES = {
    "kv": lambda b, h, sq, skv: [skv],
    "q_kv": lambda b, h, sq, skv: [sq, skv],
    "padding": lambda b, h, sq, skv: [b, 1, 1, skv],
    "full": lambda b, h, sq, skv: [b, h, sq, skv],
    "heads": lambda b, h, sq, skv: [1, h, 1, skv],
    "rows": lambda b, h, sq, skv: [b, 1, sq, 1],
    "short": lambda b, h, sq, skv: [b, 1, sq, skv - 37],
}


@pytest.mark.parametrize("kind", ["bool", "additive"])
@pytest.mark.parametrize("shape", list(MASK_SHAPES))
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_masks(kind, shape, causal):
    b, h, sq, skv = 2, 4, 140, 211
    q, k, v = make_inputs(b, h, 2, sq, skv, 64, 64, torch.float16, seed=len(shape))
    g = torch.Generator(device="cuda").manual_seed(5)
    mshape = MASK_SHAPES[shape](b, h, sq, skv)
    if kind == "bool":
        mask = torch.rand(mshape, device="cuda", generator=g) > 0.3
    else:
        mask = (torch.randn(mshape, device="cuda", generator=g) * 2).to(torch.float16)
    check(q, k, v, mask=mask, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("slope", [0.004, -0.004, 0.04], ids=["rising", "falling", "steep"])
@pytest.mark.parametrize("padded", [False, True], ids=["nomask", "padding"])
def test_moving_row_maxima(dtype, d, causal, slope, padded):
    """Keys scaled along the sequence so the row maxima move from key block to key block: by less
    than 2^8 per block in exp2 units (rising), not at all (falling) or by more in every block
    (steep), the cases an online softmax that rescales lazily or keeps a stale max must get right
    (NOTES-attention item 36); alone and with a key-padding mask (the key-row kernels)."""
    q, k, v = make_inputs(2, 4, 4, 700, 1100, d, d, DTYPES[dtype], seed=5)
    j = torch.arange(1100, device="cuda", dtype=torch.float32).view(1, 1, -1, 1)
    ramp = (1 + slope * j) if slope > 0 else (1 + abs(slope) * j).flip(2)
    mask = None
    if padded:
        mask = torch.zeros(2, 1, 1, 1100, device="cuda", dtype=q.dtype)
        mask[0, ..., 900:] = -math.inf
    check(q, (k.float() * ramp).to(q.dtype), v, causal=causal, mask=mask)


def test_fully_masked_rows_are_zero():
    b, h, sq, skv = 2, 4, 100, 150
    q, k, v = make_inputs(b, h, h, sq, skv, 128, 128, torch.bfloat16, seed=3)
    mask = torch.rand(b, 1, sq, skv, device="cuda") > 0.5
    mask[:, :, ::7] = False  # every 7th query row sees nothing
    got = check(q, k, v, mask=mask)
    assert torch.count_nonzero(got[:, :, ::7]) == 0
    additive = torch.zeros(b, 1, sq, skv, device="cuda", dtype=torch.bfloat16)
    additive[:, :, ::5] = -math.inf
    got = check(q, k, v, mask=additive)
    assert torch.count_nonzero(got[:, :, ::5]) == 0


def test_float32_additive_mask_with_half_inputs():
    q, k, v = make_inputs(1, 2, 2, 77, 99, 64, 64, torch.float16, seed=9)
    mask = torch.randn(77, 99, device="cuda") * 3
    check(q, k, v, mask=mask)


def test_large_finite_mask_is_not_fully_masked():
    q, k, v = make_inputs(1, 2, 2, 64, 64, 64, 64, torch.float16, seed=11)
    mask = torch.full((64, 64), -10000.0, device="cuda", dtype=torch.float16)
    got = check(q, k, v, mask=mask)
    assert torch.count_nonzero(got) > 0


# ---------------------------------------------------------------------------
# Key padding (one mask row per batch / head). The warp-specialised kernel reads
# two bounds from the mask row: blocks of no-op keys (additive 0 / True) skip the
# mask work, blocks past the last live key (False, -inf, or additive at least
# 9000 below the first keys) are skipped; the other paths compute every block,
# with the same results. Block sizes are 32 .. 128 keys depending on the path,
# so the patterns end mid-block (200), on every block boundary (256), and skv is
# a multiple of none. These grids take d64's 64-row tile; under 'auto-m192' an
# even skv with a float16 / bfloat16 additive mask takes the three-consumer
# tile (the mask held packed), an odd one the two-consumer tile.
PAD_PATTERNS = {  # dead key ranges of one mask row
    "none": lambda s: [],
    "right-mid": lambda s: [(200, s)],
    "right-edge": lambda s: [(256, s)],
    "right-last": lambda s: [(s - 1, s)],
    "left": lambda s: [(0, 100)],
    "holes": lambda s: [(60, 190), (300, s)],
    "all": lambda s: [(0, s)],
    "one-live": lambda s: [(1, s)],
}
PAD_KINDS = ["minus1e4", "neginf", "finfo-min", "bool"]


def _dead_keys(patterns, skv, device="cuda"):
    dead = torch.zeros(len(patterns), skv, dtype=torch.bool, device=device)
    for r, name in enumerate(patterns):
        for lo, hi in PAD_PATTERNS[name](skv):
            dead[r, lo:hi] = True
    return dead


def _padding_values(dead, kind, dtype):
    """[rows, skv] mask values: bool (True = attend) or additive (0 live, `kind` dead) in `dtype`."""
    if kind == "bool":
        return ~dead
    fill = {"minus1e4": -10000.0, "neginf": -math.inf, "finfo-min": torch.finfo(dtype).min}[kind]
    return torch.zeros(dead.shape, dtype=dtype, device=dead.device).masked_fill(dead, fill)


def _aligned_rows(values):
    """The same values in aligned rows ([B, 1, 1, skv] view of a buffer whose rows are a multiple
    of 64 elements), so the vectorised scan runs, with a partial last chunk."""
    rows, skv = values.shape
    width = (skv + 63) // 64 * 64 + 64
    buf = torch.zeros(rows, 1, 1, width, dtype=values.dtype, device=values.device)
    view = buf[..., :skv]
    view.copy_(values.view(rows, 1, 1, skv))
    return view


@pytest.mark.parametrize("kind", PAD_KINDS)
@pytest.mark.parametrize("d,dtype", [(64, "float16"), (128, "bfloat16"), (256, "float16")])
@pytest.mark.parametrize("causal", ["full", "causal", "causal0"])
@pytest.mark.parametrize("skv", [333, 334])
def test_key_padding(kind, d, dtype, causal, skv):
    # One batch row per pattern, in one launch (bfloat16's -10000 is -9984). causal: bottom-right
    # (rows see the dead suffixes); causal0: top-left (the first rows of "left" see only dead keys).
    # finfo.min leaves out rows whose visible keys are all dead ("all"; "left" under causal0): in
    # log2 units bfloat16's min overflows to -inf, so every kernel treats such a row as fully
    # masked (zeros) where the reference has a softmax (a limit of the mask scaling, not of the
    # block skipping).
    dt = DTYPES[dtype]
    patterns = [p for p in PAD_PATTERNS
                if not (kind == "finfo-min" and (p == "all" or (p == "left" and causal == "causal0")))]
    b, hq, hkv, sq = len(patterns), 4, 2, 140
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, d, dt, seed=d + len(kind) + skv)
    mask = _aligned_rows(_padding_values(_dead_keys(patterns, skv), kind, dt))
    got = check(q, k, v, mask=mask, causal=causal != "full", causal_offset=skv - sq if causal == "causal" else 0)
    if kind in ("neginf", "bool"):
        assert torch.count_nonzero(got[patterns.index("all")]) == 0  # every key -inf: zeros
    elif kind == "minus1e4":
        assert torch.count_nonzero(got[patterns.index("all")]) > 0  # finite: an ordinary softmax


@pytest.mark.parametrize("kind", PAD_KINDS)
@pytest.mark.parametrize("d,dtype", [(64, "float16"), (128, "bfloat16"), (256, "bfloat16")])
def test_key_padding_is_exact(kind, d, dtype, kernel_path):
    # Dead keys change nothing, bit for bit: each padded row against the same row with its dead
    # suffix cut off (so the kernel never sees those keys). Live parts mix no-op blocks with
    # random mask values and, for bool, holes. Every length is even, so both calls take the
    # same kernel (a packable mask's tile differs from the others'). Only the warp-specialised
    # kernel (path auto on an H100) skips dead blocks; the others run them, so their rows may
    # differ in the last bit (the reference tests bound them).
    dt = DTYPES[dtype]
    b, h, sq, skv = 4, 4, 150, 334
    lengths = [334, 256, 200, 2]
    q, k, v = make_inputs(b, h, h, sq, skv, d, d, dt, seed=7 + d)
    g = torch.Generator(device="cuda").manual_seed(3)
    dead = torch.arange(skv, device="cuda").view(1, skv) >= torch.tensor(lengths, device="cuda").view(b, 1)
    values = _padding_values(dead, kind, dt)
    live_noise = torch.zeros(b, skv, dtype=torch.bool, device="cuda")
    live_noise[:, 130:] = True  # blocks past the no-op prefix carry real mask values
    if kind == "bool":
        values = values & ~(live_noise & (torch.rand(b, skv, device="cuda", generator=g) < 0.2))
    else:
        noise = (torch.randn(b, skv, device="cuda", generator=g) * 2).to(dt)
        values = torch.where(live_noise & ~dead, noise, values)
    mask = _aligned_rows(values)
    out, lse = ops.attention(q, k, v, mask=mask, return_lse=True)
    torch.cuda.synchronize()
    for r, n in enumerate(lengths):
        cut, cut_lse = ops.attention(q[r:r + 1], k[r:r + 1, :, :n], v[r:r + 1, :, :n], mask=mask[r:r + 1, ..., :n],
                                     return_lse=True)
        torch.cuda.synchronize()
        if kernel_path not in AUTO_PATHS or torch.cuda.get_device_capability() != (9, 0):
            torch.testing.assert_close(out[r:r + 1], cut, rtol=2e-2, atol=2e-3)
            torch.testing.assert_close(lse[r:r + 1], cut_lse, rtol=1e-4, atol=1e-4)
            continue
        assert torch.equal(out[r:r + 1], cut), f"row {r} (live keys {n}): differs from the cut-off keys"
        assert torch.equal(lse[r:r + 1], cut_lse), f"row {r} (live keys {n}): lse differs"


@pytest.mark.parametrize("layout", ["misaligned", "strided", "shared", "heads", "float32", "short", "near-gap"])
def test_key_padding_layouts(layout):
    # The scan's other loads (element loads for odd row starts and key strides != 1: the
    # two-consumer tile), masks shared by every batch or differing per head, a float32 mask, a short
    # mask (keys past it are masked), and values around the dead gap (-9992 before -10000 is live,
    # 5 % of the row's weight; 0 then -9000 is dead); "heads", "short" and "near-gap" are packable.
    b, hq, hkv, sq, d = 3, 4, 2, 100, 64
    skv = 301 if layout in ("misaligned", "strided") else 302
    dt = torch.float16
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, d, dt, seed=len(layout))
    rows = ["right-mid", "holes", "one-live"]
    if layout == "misaligned":  # contiguous [B, 1, 1, 301] halves: rows 1 and 2 start mid-chunk
        mask = _padding_values(_dead_keys(rows, skv), "minus1e4", dt).view(b, 1, 1, skv)
    elif layout == "strided":  # key stride 2
        buf = torch.zeros(b, 1, 1, 2 * skv, dtype=dt, device="cuda")
        mask = buf[..., ::2]
        mask.copy_(_padding_values(_dead_keys(rows, skv), "minus1e4", dt).view(b, 1, 1, skv))
        assert mask.stride(-1) == 2
    elif layout == "shared":  # [skv]: one row for every batch and head
        mask = _padding_values(_dead_keys(["holes"], skv), "bool", dt).view(skv)
    elif layout == "heads":  # [1, H, 1, skv]: a row per head
        mask = _padding_values(_dead_keys(["right-mid", "left", "all", "right-edge"], skv), "neginf", dt)
        mask = mask.view(1, hq, 1, skv)
    elif layout == "float32":
        mask = _aligned_rows(_padding_values(_dead_keys(rows, skv), "finfo-min", torch.float32))
    elif layout == "short":  # 250 of 301 keys: the rest are -inf by ONNX's padding
        mask = _aligned_rows(_padding_values(_dead_keys(rows, 250), "minus1e4", dt))
    else:
        vals = torch.zeros(b, skv, dtype=torch.float32, device="cuda")
        vals[0, :] = -9992.0  # float16 has no -9999
        vals[0, 150:] = -10000.0  # live: only 8 below the first keys
        vals[1, 150:] = -9000.0  # dead: exactly the gap below the leading zeros
        vals[2, 100:] = -8000.0  # live
        vals[2, 200:] = -10000.0  # dead
        mask = _aligned_rows(vals.to(dt))
    check(q, k, v, mask=mask)
    check(q, k, v, mask=mask, causal=True, causal_offset=skv - sq)


@pytest.mark.parametrize("kind", ["minus1e4", "bool"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_key_padding_persistent(kind, d, causal):
    # More tiles than SMs (the persistent kernel's CTAs each scan several rows), random lengths.
    b, hq, hkv, sq, skv = 16, 12, 4, 300, 700
    dt = torch.bfloat16
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, d, dt, seed=d + causal)
    g = torch.Generator(device="cuda").manual_seed(9)
    lengths = torch.randint(0, skv + 1, (b, 1), device="cuda", generator=g)
    lengths[:3, 0] = torch.tensor([skv, 0, 128], device="cuda")
    dead = torch.arange(skv, device="cuda").view(1, skv) >= lengths
    mask = _padding_values(dead, kind, dt).view(b, 1, 1, skv)
    check(q, k, v, mask=mask, causal=causal, causal_offset=skv - sq if causal else 0)


# ---------------------------------------------------------------------------
# Scale and softcap.
@pytest.mark.parametrize("scale", [0.5, 0.01, -0.2])
@pytest.mark.parametrize("softcap", [0.0, 5.0, 30.0])
def test_scale_softcap(scale, softcap):
    q, k, v = make_inputs(2, 4, 4, 160, 160, 64, 64, torch.float16, seed=1)
    check(q, k, v, scale=scale, softcap=softcap, causal=softcap == 5.0)


@pytest.mark.parametrize("d,dt", [(128, torch.bfloat16), (64, torch.float16)])
def test_softcap_with_mask(d, dt):
    # A key-padding mask of Q's dtype: without softcap the key-row kernels built without
    # softcap code take it; with softcap it must go to a kernel that applies it.
    q, k, v = make_inputs(2, 4, 4, 96, 200, d, d, dt, seed=2)
    mask = torch.randn(2, 1, 1, 200, device="cuda").to(dt)
    check(q, k, v, softcap=20.0, mask=mask)


# ---------------------------------------------------------------------------
# Packed tiles (HopperWsConfig::PACK_HEADS): 192-row tiles over the heads' rows end to end, so a
# tile's three 64-row slots may lie in two heads (each consumer reads its own head's K / V, the
# second head's in a second ring), and the grid's last tile may hold slots past the last row. Cases:
# tiles that straddle heads, a last tile with an empty slot (1280, 3584 and 2048 rows), GQA heads
# that share K / V across a straddle (loaded once), key counts that end mid-block, on a narrow half
# block (1088) and below one block (64), the [B, S, H, D] layout, and output guard rows between the
# heads. On 'auto-packed' they run the packed kernel; on the other paths its neighbours.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("b,hq,hkv,sq,skv", [(2, 3, 3, 128, 128), (1, 5, 5, 256, 1000), (3, 2, 2, 320, 1088),
                                             (2, 4, 2, 448, 64), (1, 3, 1, 1024, 700), (2, 2, 2, 512, 4097)])
def test_packed_heads(kernel_path, dtype, b, hq, hkv, sq, skv):
    q, k, v = make_inputs(b, hq, hkv, sq, skv, 64, 64, DTYPES[dtype], seed=sq + skv)
    hopper = torch.cuda.get_device_capability() == (9, 0) and "90a" in _C.build_info()["cuda_archs"]
    if kernel_path == "auto-packed" and hopper:
        name = _kernel_name(q, k, v)
        assert name.startswith("flash_fwd_ws_pingpong_packed<") and ",d64,m192,n128," in name, name
        assert not _kernel_name(q, k, v, causal=True).startswith("flash_fwd_ws_pingpong_packed<")
        # Variant 7: the same tile a head at a time (A/B timing), run here too.
        previous = ops._native().attention_set_tile_variant(7)
        try:
            assert _kernel_name(q, k, v).startswith("flash_fwd_ws_pingpong<float16" if dtype == "float16"
                                                    else "flash_fwd_ws_pingpong<bfloat16")
            check(q, k, v)
        finally:
            ops._native().attention_set_tile_variant(previous)
    check(q, k, v)
    # [B, S, H, D] views, Q's heads strided (one spare head a row).
    qb = torch.randn(b, sq, hq + 1, 64, device="cuda").to(DTYPES[dtype])[:, :, :hq]
    kb, vb = (torch.randn(b, skv, hkv, 64, device="cuda").to(DTYPES[dtype]) for _ in range(2))
    check(qb, kb, vb, layout="bshd", q4=qb.transpose(1, 2), k4=kb.transpose(1, 2), v4=vb.transpose(1, 2))
    # Guard rows before and after every head's rows stay untouched.
    guard = 64
    buf = torch.full((b, hq, sq + 2 * guard, 64), 7.0, dtype=q.dtype, device=q.device)
    out = buf[:, :, guard:guard + sq]
    out.fill_(math.nan)
    ops.attention(q, k, v, out=out)
    torch.cuda.synchronize()
    assert bool((buf[:, :, :guard] == 7.0).all()) and bool((buf[:, :, guard + sq:] == 7.0).all()), \
        "rows outside the output view were written"
    assert not torch.isnan(out).any()


# ---------------------------------------------------------------------------
# Layouts: [B, S, H, D] views of packed QKV (the 3-D ONNX form), strided
# without copies; misaligned views take the element-load variant.
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "misaligned"])
@pytest.mark.parametrize("d", [64, 128])
def test_packed_bshd(offset, d):
    b, s, h = 2, 190, 4
    base = torch.randn(b * s * 3 * h * d + offset, device="cuda").to(torch.float16)
    qkv = base[offset:].view(b, s, 3, h, d)
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    name = ops._native().attention_forward(
        "float16", int(q.data_ptr()), int(k.data_ptr()), int(v.data_ptr()), int(q.data_ptr()), b, h, h, s, s, d, d,
        q_strides=(q.stride(0), q.stride(2), q.stride(1)), k_strides=(k.stride(0), k.stride(2), k.stride(1)),
        v_strides=(v.stride(0), v.stride(2), v.stride(1)), out_strides=(s * h * d, d, h * d), scale=0.1,
        dry_run=True)
    assert name.endswith("unaligned>") == (offset == 1), name
    check(q, k, v, layout="bshd", q4=q.transpose(1, 2), k4=k.transpose(1, 2), v4=v.transpose(1, 2), causal=True)


# ---------------------------------------------------------------------------
# Output rows land in a view with guard rows before and after every head's rows,
# which must stay untouched: causal tiles start before row 0 (m_shift), the
# last tile runs past q_len, and whole consumers' rows fall outside the tensor
# (the warp-specialised kernel's TMA stores and, on 'auto-consumer-store', its
# consumers' own).
@pytest.mark.parametrize("d,causal,sq,skv,offset", [(64, True, 1000, 1000, 0), (128, True, 1000, 300, -300),
                                                    (64, False, 777, 1300, 0), (128, False, 130, 70, 0),
                                                    (64, True, 65, 4097, 5), (64, True, 200, 333, 0)])
def test_output_rows_only(d, causal, sq, skv, offset):
    q, k, v = make_inputs(2, 8, 4, sq, skv, d, d, torch.bfloat16, seed=d + sq)
    guard = 80
    buf = torch.full((2, 8, sq + 2 * guard, d), 7.0, dtype=q.dtype, device=q.device)
    out = buf[:, :, guard:guard + sq]
    out.fill_(math.nan)
    ops.attention(q, k, v, causal=causal, causal_offset=offset, out=out)
    torch.cuda.synchronize()
    assert bool((buf[:, :, :guard] == 7.0).all()) and bool((buf[:, :, guard + sq:] == 7.0).all()), \
        "rows outside the output view were written"
    assert not torch.isnan(out).any()
    exact, _ = reference(q, k, v, causal=causal, causal_offset=offset)
    naive, _ = reference(q, k, v, causal=causal, causal_offset=offset, compute_dtype=q.dtype)
    bound = 2 * (naive.double() - exact).abs().max().item() + ATOL[q.dtype]
    assert (out.double() - exact).abs().max().item() <= bound


# ---------------------------------------------------------------------------
# Edge sizes.
def test_empty_kv_gives_zeros():
    q, k, v = make_inputs(2, 4, 4, 33, 0, 64, 64, torch.float16)
    out, lse = ops.attention(q, k, v, return_lse=True)
    torch.cuda.synchronize()
    assert torch.count_nonzero(out) == 0
    assert torch.isneginf(lse).all()


def test_empty_queries_is_noop():
    q, k, v = make_inputs(2, 4, 4, 0, 10, 64, 64, torch.float16)
    out = ops.attention(q, k, v)
    torch.cuda.synchronize()
    assert out.shape == (2, 4, 0, 64)


def test_many_heads_grid():
    # More (batch, head) pairs than a grid dimension of 65535 could hold.
    q, k, v = make_inputs(700, 100, 100, 1, 3, 64, 64, torch.float16)
    check(q, k, v)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("d", [64, 128])
def test_long_sequence_16k(causal, d):
    q, k, v = make_inputs(1, 2, 1, 16384, 16384, d, d, torch.float16, seed=16)
    check(q, k, v, causal=causal)


@pytest.mark.parametrize("d", [64, 128])
def test_persistent_many_tiles_per_cta(d):
    # Non-causal, three or more tiles per CTA of the persistent grid (576-1536 tiles), GQA: the
    # warp-specialised kernel's Q buffer and K/V ring go round several times per CTA.
    q, k, v = make_inputs(6, 16, 4, 1000, 300, d, d, torch.float16, seed=d + 5)
    check(q, k, v)


@pytest.mark.parametrize("d", [64, 128])
def test_persistent_empty_tiles(d):
    # Causal with an offset below minus a tile's rows, three or more tiles per CTA: a persistent
    # CTA's tiles mix empty ones (every row fully masked: zeros, lse -inf) with ones it computes.
    q, k, v = make_inputs(4, 16, 4, 1000, 300, d, d, torch.bfloat16, seed=d + 9)
    check(q, k, v, causal=True, causal_offset=-300)


@pytest.mark.parametrize("schedule", [-2, 0, 1, 8, 64], ids=lambda s: "plain" if s == -2 else f"section{s}")
@pytest.mark.parametrize("d,sq", [(64, 700), (128, 1000)])
def test_schedules(schedule, d, sq):
    # Every schedule of the warp-specialised kernel (head-major without dealing the partial tiles
    # apart, a CTA per tile, or persistent with sections of heads whose K/V take 1 .. 64 MiB: one
    # head per section up to all of them), with more tiles than SMs, GQA, a partial last tile and,
    # causal, an offset.
    q, k, v = make_inputs(3, 16, 4, sq, sq + 40, d, d, torch.bfloat16, seed=schedule + d)
    with forced_schedule(schedule):
        check(q, k, v, causal=True, causal_offset=40)
        check(q, k, v)


@pytest.mark.parametrize("b,h,sq", [(3, 16, 700), (4, 16, 600), (4, 12, 900), (16, 32, 1024)])
def test_causal_sections_costed(b, h, sq):
    # d64 causal on the persistent grid: by default the launcher costs every section size
    # (causal_section_heads) and, on 132 SMs, takes 48, 64, 48 and 33 heads here where the 8 MiB
    # rule gave 46, 54, 36 and 32 (sections that don't divide the heads; all of them). Which CTA
    # runs a tile changes nothing in it: the output matches the 8 MiB schedule's bit for bit,
    # and the reference where it is small enough to compute.
    q, k, v = make_inputs(b, h, h, sq, sq, 64, 64, torch.float16, seed=sq + h)
    if b * h * sq * sq <= 64 * 1024 * 1024:
        check(q, k, v, causal=True)
    default, forced = (torch.full_like(q, math.nan) for _ in range(2))
    ops.attention(q, k, v, causal=True, out=default)
    with forced_schedule(8):
        ops.attention(q, k, v, causal=True, out=forced)
    torch.cuda.synchronize()
    assert not torch.isnan(default).any()
    assert torch.equal(default, forced)


@pytest.mark.parametrize("b,h,sq,d", [(4, 32, 1024, 128), (2, 16, 4096, 128), (3, 32, 700, 128), (8, 32, 2048, 64),
                                      (6, 16, 1000, 64), (8, 16, 1024, 64), (1, 96, 1024, 64), (1, 40, 2048, 128)])
def test_causal_tail(b, h, sq, d):
    # Causal grids of four rounds or more on 132 SMs. The launcher deals the last rounds from its
    # table (causal_tail, persistent_tile's tail) where that saves TAIL_GAIN_MIN (5 %) of the
    # modelled makespan: the 700-, 1000-token and last two grids here (tests/cpp checks which); the
    # others are the snake alone. Which CTA runs a tile changes nothing in it: the default gives the
    # same bits as without the table (attention_set_schedule(-5)), and matches the reference where
    # that is small enough to compute.
    q, k, v = make_inputs(b, h, h, sq, sq, d, d, torch.float16, seed=sq + h + d)
    if b * h * sq * sq <= 64 * 1024 * 1024:
        check(q, k, v, causal=True)
    default, plain = (torch.full_like(q, math.nan) for _ in range(2))
    ops.attention(q, k, v, causal=True, out=default)
    with forced_schedule(-5):
        ops.attention(q, k, v, causal=True, out=plain)
    torch.cuda.synchronize()
    assert not torch.isnan(default).any()
    assert torch.equal(default, plain)


@pytest.mark.parametrize("b,h,sq,d", [(1, 4, 10000, 64), (1, 3, 6300, 128)])
def test_causal_sections_long(b, h, sq, d):
    # Causal with more query blocks a head than CAUSAL_TILES_PER_HEAD_MAX (53 and 50 here): a CTA
    # per tile by default; forced sections of every head (128 MiB, the persistent grid: item 62
    # measured them) and the default give the same bits, and match the reference.
    q, k, v = make_inputs(b, h, h, sq, sq, d, d, torch.bfloat16, seed=sq + d)
    default = check(q, k, v, causal=True)
    for schedule in (128, 0):
        forced = torch.full_like(q, math.nan)
        with forced_schedule(schedule):
            ops.attention(q, k, v, causal=True, out=forced)
        torch.cuda.synchronize()
        assert torch.equal(default, forced), f"schedule {schedule} differs from the default"


@pytest.mark.parametrize("b,h,sq,d", [(1, 140, 200, 128), (1, 66, 260, 128), (1, 37, 5070, 128), (2, 32, 4000, 64),
                                      (32, 12, 197, 64), (32, 12, 448, 64), (1, 42, 3000, 64)])
def test_partial_tiles_dealt(b, h, sq, d):
    # Non-causal, more tiles than SMs, each head's last query block partial: the persistent grid
    # deals those tiles to the CTAs that run one more tile than the others (persistent_tile's
    # balance_ways). On 132 SMs, with 128-row (d128) or 192-row tiles: fewer extra tiles than a
    # round's partial ones, so every CTA takes them (140 x 200), a round's partial tiles
    # wrapping round the CTAs that take them (37 x 5070, 64 x 4000), two rounds (66 x 260), and
    # 256-row tiles (448); on the other tile paths the same shapes in the plain order.
    q, k, v = make_inputs(b, h, h, sq, sq, d, d, torch.float16, seed=sq + h)
    check(q, k, v)


@pytest.mark.parametrize("b,h,sq,d", [(1, 200, 128, 128), (2, 70, 512, 64), (4, 66, 256, 128)])
def test_even_rounds(b, h, sq, d):
    # Non-causal whole tiles, more than a round of them: by default the persistent grid runs on as
    # few CTAs as its rounds need (even_round_grid; on 132 SMs 200 tiles of 128 rows take 100 CTAs
    # of two; 528 tiles are whole rounds). Which CTA runs a tile changes nothing in it: the plain
    # grid on every SM (-2) gives the same bits, and both match the reference.
    q, k, v = make_inputs(b, h, h, sq, sq, d, d, torch.float16, seed=sq + h)
    default = check(q, k, v)
    forced = torch.full_like(q, math.nan)
    with forced_schedule(-2):
        ops.attention(q, k, v, out=forced)
    torch.cuda.synchronize()
    assert torch.equal(default, forced)


def _raw_causal(q, k, v, out, *, offset=0, workspace=None, workspace_bytes=None, stream=0):
    """attention_forward on [B, H, S, D] tensors, causal, with or without a workspace (ops.attention
    always passes one for causal inputs)."""
    ptr = 0 if workspace is None else int(workspace.data_ptr())
    size = (0 if workspace is None else workspace.numel()) if workspace_bytes is None else workspace_bytes
    return _forward_raw(q, k, v, out, scale=q.shape[3] ** -0.5, causal=True, causal_offset=offset, workspace=ptr,
                        workspace_bytes=size, stream=stream)


def test_workspace_bytes():
    native = ops._native()
    assert native.attention_workspace_bytes("float16", causal=True) >= 4
    assert native.attention_workspace_bytes("bfloat16", causal=True) >= 4
    assert native.attention_workspace_bytes("float16", causal=False) == 0
    assert native.attention_workspace_bytes("float32", causal=True) == 0
    with pytest.raises(ValueError, match="attention_workspace_bytes: dtype must be"):
        native.attention_workspace_bytes("int8", causal=True)


@pytest.mark.parametrize("b,hq,hkv,sq,skv,offset,d,heads", [
    (3, 16, 4, 700, 740, 40, 64, 0),      # 192-row tiles, GQA, a partial first tile a head
    (3, 16, 4, 1000, 1040, 40, 128, 0),   # 128-row tiles, more tiles than SMs
    (4, 16, 4, 1000, 300, -300, 128, 3),  # empty tiles among the drawn ones, sections of 3 heads
    (1, 3, 3, 6300, 6300, 0, 128, 1),     # a long head per section
    (1, 2, 1, 300, 300, 0, 64, 0),        # fewer tiles than SMs: no tile is drawn
    (2, 40, 40, 1024, 1024, 0, 64, 64),   # one section of every head
])
def test_drawn_tiles(kernel_path, b, hq, hkv, sq, skv, offset, d, heads):
    # Causal tiles drawn from the workspace's counter (attention_set_schedule(-3)) in sections of
    # `heads` heads (0: the launcher's choice): which CTA runs a tile changes nothing in it, so
    # the output matches the computed order (no workspace) bit for bit, and the reference.
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, d, torch.bfloat16, seed=sq + d + heads)
    native = ops._native()
    previous_heads = native.attention_set_section_heads(heads)
    try:
        with forced_schedule(-3):
            drawn = check(q, k, v, causal=True, causal_offset=offset, compare_naive=b * hq * sq * skv <= 2 ** 26)
        computed = torch.full_like(drawn, math.nan)
        _raw_causal(q, k, v, computed, offset=offset)
    finally:
        native.attention_set_section_heads(previous_heads)
    torch.cuda.synchronize()
    assert torch.equal(drawn, computed)


def test_drawn_tiles_need_the_whole_workspace():
    # A workspace smaller than attention_workspace_bytes is not used (the computed order runs):
    # same bits as without one, and the bytes past it are left alone.
    q, k, v = make_inputs(1, 4, 4, 8000, 8000, 128, 128, torch.float16, seed=11)
    need = ops._native().attention_workspace_bytes("float16", causal=True)
    ws = torch.full((need + 16,), 0x5A, dtype=torch.uint8, device="cuda")
    outs = []
    for size in (None, need - 1, need):
        out = torch.full_like(q, math.nan)
        _raw_causal(q, k, v, out, workspace=None if size is None else ws, workspace_bytes=size)
        outs.append(out)
    torch.cuda.synchronize()
    assert not torch.isnan(outs[0]).any()
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    assert (ws[need:] == 0x5A).all(), "bytes past the workspace were written"


def test_drawn_tiles_in_cuda_graph():
    # Replays of a captured launch draw from a counter zeroed by the captured memset each time:
    # every replay computes every tile (the output is poisoned before each), and two launches
    # with workspaces of their own may run side by side on two streams.
    q, k, v = make_inputs(1, 8, 8, 8192, 8192, 128, 128, torch.float16, seed=12)
    need = ops._native().attention_workspace_bytes("float16", causal=True)
    expected = torch.full_like(q, math.nan)
    _raw_causal(q, k, v, expected)  # the computed order
    out = torch.full_like(q, math.nan)
    ws = torch.zeros(need, dtype=torch.uint8, device="cuda")
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        _raw_causal(q, k, v, out, workspace=ws, stream=side.cuda_stream)
    for _ in range(3):
        out.fill_(math.nan)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)
    outs = [torch.full_like(q, math.nan) for _ in range(2)]
    wss = [torch.zeros(need, dtype=torch.uint8, device="cuda") for _ in range(2)]
    streams = [torch.cuda.Stream() for _ in range(2)]
    torch.cuda.synchronize()
    for o, w, st in zip(outs, wss, streams):
        _raw_causal(q, k, v, o, workspace=w, stream=st.cuda_stream)
    torch.cuda.synchronize()
    assert all(torch.equal(o, expected) for o in outs)


def test_cluster_tile_under_the_graph_cache(kernel_path):
    # The two-CTA cluster tile (d128 non-causal from 8k keys) captured by the native graph cache:
    # replayed with the same buffers, and with other buffers instantiated anew rather than
    # updated in place (cluster launches, issue 7); every run matches the uncaptured launch.
    if kernel_path != "auto":
        pytest.skip("the default tile choice only")
    q, k, v = make_inputs(1, 2, 2, 256, 8192, 128, 128, torch.float16, seed=46)
    name = _kernel_name(q, k, v)
    if not name.startswith("flash_fwd_ws_pingpong_c2<"):
        pytest.skip(f"no cluster tile on this device/build ({name})")
    expected = torch.full_like(q, math.nan)
    _forward_raw(q, k, v, expected, scale=0.125)
    torch.cuda.synchronize()
    assert not torch.isnan(expected).any()
    stream, cache = _C.CudaStream(0), _C.GraphCache(2)
    outs = [torch.full_like(q, math.nan) for _ in range(2)]
    runs = []
    for out in (outs[0], outs[0], outs[1]):
        out.fill_(math.nan)
        torch.cuda.synchronize()
        launch = lambda s, out=out: _forward_raw(q, k, v, out, scale=0.125, stream=s)  # noqa: E731
        runs.append(cache.run(0, [[1, 2, 256, 8192, 128]], [out.data_ptr()], launch, stream.handle))
        stream.synchronize()
        assert torch.equal(out, expected)
    assert runs == ["captured", "replayed", "reinstantiated"]
    assert cache.uses_clusters(0, [[1, 2, 256, 8192, 128]])
    assert (cache.stats()["cluster_reinstantiations"], cache.stats()["updates"]) == (1, 0)


# ---------------------------------------------------------------------------
# Programmatic dependent launch: the sm_90a kernels start while the kernel ahead finishes.
def dependent_launch(on: bool):
    """attention_set_dependent_launch(on) for the block, the previous setting restored after it."""
    return native_setting("attention_set_dependent_launch", on)


PDL_CASES = [  # b, hq, hkv, sq, skv, d, causal: packed d64 heads, 192-row causal, d128, d256, GQA
    (2, 4, 4, 512, 512, 64, False), (2, 4, 2, 700, 700, 64, True), (1, 4, 4, 1024, 1024, 128, False),
    (1, 2, 2, 300, 900, 256, True),
]


@pytest.mark.parametrize("b,hq,hkv,sq,skv,d,causal", PDL_CASES)
@pytest.mark.parametrize("late", ["q", "k", "v", "out"])
def test_dependent_launch_waits_for_the_kernel_ahead(kernel_path, late, b, hq, hkv, sq, skv, d, causal):
    # The kernel ahead (late_copy_probe) lets the attention launch at once and writes its input
    # (q, k or v: NaN until then) 300 us later, or copies the output buffer away only then: the
    # attention must read the new input and write its output only after the copy read it. Same
    # bits as the launch without the overlap.
    q, k, v = make_inputs(b, hq, hkv, sq, skv, d, d, torch.float16, seed=sq + d)
    stream = torch.cuda.current_stream().cuda_stream
    expected = torch.full_like(q, math.nan)
    with dependent_launch(False):
        _forward_raw(q, k, v, expected, scale=0.125, causal=causal)
    torch.cuda.synchronize()
    assert not torch.isnan(expected).any()
    with dependent_launch(True):
        inputs = {"q": q, "k": k, "v": v}
        out = torch.full_like(q, math.nan)
        if late == "out":
            pattern = torch.randn(out.shape, device="cuda").to(out.dtype)
            out.copy_(pattern)
            saved = torch.full_like(out, math.nan)
            torch.cuda.synchronize()
            _C.late_copy_probe(out.data_ptr(), saved.data_ptr(), out.numel() * 2, delay_us=300, stream=stream)
        else:
            src = inputs[late]
            inputs[late] = torch.full_like(src, math.nan)
            torch.cuda.synchronize()
            _C.late_copy_probe(src.data_ptr(), inputs[late].data_ptr(), src.numel() * 2, delay_us=300, stream=stream)
        _forward_raw(inputs["q"], inputs["k"], inputs["v"], out, scale=0.125, causal=causal, stream=stream)
        torch.cuda.synchronize()
    assert torch.equal(out, expected)
    if late == "out":
        assert torch.equal(saved, pattern), "the output was written before the kernel ahead read it"


def test_dependent_launch_in_cuda_graph(kernel_path):
    # A captured late copy and attention (a programmatic edge between them), replayed: each
    # replay's attention reads the copy's bytes.
    if kernel_path not in ("auto", "wgmma"):
        pytest.skip("one path per sm_90a kernel family (auto: warp-specialised, wgmma: plain)")
    q, k, v = make_inputs(2, 4, 4, 512, 512, 64, 64, torch.bfloat16, seed=5)
    expected = torch.full_like(q, math.nan)
    _forward_raw(q, k, v, expected, scale=0.125)
    torch.cuda.synchronize()
    q_late, out = torch.full_like(q, math.nan), torch.full_like(q, math.nan)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with dependent_launch(True):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            _C.late_copy_probe(q.data_ptr(), q_late.data_ptr(), q.numel() * 2, delay_us=300, stream=side.cuda_stream)
            _forward_raw(q_late, k, v, out, scale=0.125, stream=side.cuda_stream)
    for _ in range(3):
        q_late.fill_(math.nan)
        out.fill_(math.nan)
        torch.cuda.synchronize()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, expected)


def test_late_copy_probe_rejects_bad_sizes():
    buf = torch.zeros(8, dtype=torch.float32, device="cuda")
    with pytest.raises(RuntimeError, match=r"launch_late_copy_probe\(nbytes=6"):
        _C.late_copy_probe(buf.data_ptr(), buf.data_ptr(), 6)


def test_64k_keys_stay_accurate():
    q, k, v = make_inputs(1, 2, 2, 64, 65536, 128, 128, torch.bfloat16, seed=64)
    check(q, k, v)
    check(q, k, v, causal=True, causal_offset=65536 - 64)


# ---------------------------------------------------------------------------
# Errors.
def test_float32_is_refused():
    q, k, v = make_inputs(1, 2, 2, 8, 8, 64, 64, torch.float32)
    with pytest.raises(ValueError, match="float16 and bfloat16 only"):
        ops.attention(q, k, v)


def test_heads_must_divide():
    q, _, _ = make_inputs(1, 6, 6, 8, 8, 64, 64, torch.float16)
    _, k, v = make_inputs(1, 4, 4, 8, 8, 64, 64, torch.float16)
    with pytest.raises(ValueError, match="multiple of"):
        ops.attention(q, k, v)


def test_head_dim_over_256_is_refused():
    q, k, v = make_inputs(1, 2, 2, 8, 8, 264, 264, torch.float16)
    with pytest.raises(ValueError, match="head dims"):
        ops.attention(q, k, v)


# ---------------------------------------------------------------------------
# Kernel choice.
def test_path_choice(kernel_path):
    q, k, v = make_inputs(1, 2, 2, 64, 64, 128, 128, torch.float16)
    name = _kernel_name(q, k, v)
    hopper = torch.cuda.get_device_capability() == (9, 0) and "90a" in _C.build_info()["cuda_archs"]
    if kernel_path in AUTO_PATHS and hopper:
        # A forced variant indexes every bucket's tuple: d128's third is its 176-key tile, its
        # fourth the plain wgmma config.
        assert name.startswith("flash_fwd_wgmma<" if kernel_path == "auto-m64" else "flash_fwd_ws"), name
        if kernel_path == "auto-m192":
            assert ",n176," in name, name
        if kernel_path == "auto":
            # d128 non-causal: 176-key blocks where they pad the keys less (1056 keys: 6 blocks
            # against 9 of 128), 128-key ones otherwise and for causal inputs.
            assert ",n128," in name, name
            for skv, wide in ((1056, True), (1024, False), (528, True), (4224, False), (16384, False)):
                ql, kl, vl = make_inputs(1, 2, 2, 64, skv, 128, 128, torch.float16)
                assert (",n176," in _kernel_name(ql, kl, vl)) == wide, skv
                assert ",n128," in _kernel_name(ql, kl, vl, causal=True)
            # From 8k keys, non-causal, with an even count of whole 128-row query tiles a head: the
            # 176-key tile in clusters of two CTAs sharing K / V.
            for sq, skv, clustered in ((256, 8192, True), (512, 12288, True), (256, 4096, False),
                                       (384, 16384, False), (200, 16384, False)):
                qc, kc, vc = make_inputs(1, 2, 2, sq, skv, 128, 128, torch.float16)
                name = _kernel_name(qc, kc, vc)
                assert name.startswith("flash_fwd_ws_pingpong_c2<") == clustered, (sq, skv, name)
                assert ",n176," in name or not clustered, name
                assert "_c2<" not in _kernel_name(qc, kc, vc, causal=True)
        # d256: the warp-specialised 128 x 64 tile (two ping-pong consumers), causal and
        # softcapped inputs too; a forced variant 1 ('auto-m128') is d256's plain wgmma config,
        # which masks other than key padding take (not checked here: a dry run's mask needs its
        # raw arguments).
        q2, k2, v2 = make_inputs(1, 2, 2, 64, 64, 256, 256, torch.float16)
        for kw in ({}, {"causal": True}, {"softcap": 30.0}):
            name = _kernel_name(q2, k2, v2, **kw)
            if kernel_path == "auto-m128":
                assert name.startswith("flash_fwd_wgmma<"), (kw, name)
            elif kernel_path == "auto-m192" and "softcap" not in kw:
                # Variant 2: the 80-key tile, its output staged in the V stages.
                assert name.startswith("flash_fwd_ws_pingpong<") and ",d256,m128,n80," in name, (kw, name)
            else:
                assert name.startswith("flash_fwd_ws_pingpong<") and ",d256,m128,n64," in name, (kw, name)
        if kernel_path == "auto":
            # 80-key blocks, unmasked without softcap, non-causal from 1k keys and causal from 4k.
            for skv, kw, wide in ((1024, {}, True), (1000, {}, False), (1024, {"causal": True}, False),
                                  (4096, {"causal": True}, True), (4096, {"softcap": 30.0}, False)):
                qw, kx, vw = make_inputs(1, 2, 2, 64, skv, 256, 256, torch.float16)
                name = _kernel_name(qw, kx, vw, **kw)
                assert (",d256,m128,n80," in name) == wide, (skv, kw, name)
        # d64: a grid under a wave takes the 64-row tile (two CTAs per SM), causal inputs 192 rows.
        q3, k3, v3 = make_inputs(1, 2, 2, 64, 64, 64, 64, torch.float16)
        rows = {"auto-m128": 128, "auto-m192": 192, "auto-m256": 256}.get(kernel_path, 64)
        assert f",m{rows},n{64 if rows == 256 else 128}," in _kernel_name(q3, k3, v3)
        if kernel_path == "auto":
            assert ",m64,n128,w8,b2>" in _kernel_name(q3, k3, v3)
            assert ",m192," in _kernel_name(q3, k3, v3, causal=True)
            # 16k tokens at seqlen 512 to 16k (bench_attention's d64 cases): 192-row tiles over the
            # heads' rows end to end (d64_rows: 21 rounds of 192 rows; 256 rows: 16 rounds at 1.07
            # a row; 192 rows a head: 23, 23, 21.3, 21.16, 21 and 21 rounds); causal inputs keep
            # 192 rows a head.
            for b, s in ((32, 512), (16, 1024), (8, 2048), (4, 4096), (1, 16384)):
                q4, k4, v4 = make_inputs(b, 32, 32, s, s, 64, 64, torch.float16)
                assert _kernel_name(q4, k4, v4).startswith("flash_fwd_ws_pingpong_packed<float16,d64,m192,n128,"), s
                name = _kernel_name(q4, k4, v4, causal=True)
                assert name.startswith("flash_fwd_ws_pingpong<") and ",m192," in name, s
            # A multiple of 192 rows a head: nothing to pack.
            q10, k10, v10 = make_inputs(4, 32, 32, 3072, 3072, 64, 64, torch.float16)
            assert _kernel_name(q10, k10, v10).startswith("flash_fwd_ws_pingpong<float16,d64,m192,")
            # ViT-B/16 at batch 32 (197 tokens, not a multiple of 64: no packing): 256 rows (three
            # tiles per SM against twelve of 64 rows); BERT-large's shape (H16, 384 tokens) at batch
            # 32: 192 rows, whole tiles (nothing to pack).
            q5, k5, v5 = make_inputs(32, 12, 12, 197, 197, 64, 64, torch.float16)
            assert ",m256,n64," in _kernel_name(q5, k5, v5)
            q6, k6, v6 = make_inputs(32, 16, 16, 384, 384, 64, 64, torch.float16)
            assert ",m192," in _kernel_name(q6, k6, v6)
            # 448 tokens at B32 H12: packed 192-row tiles (7 rounds of 192 rows against 5.6 of 256
            # rows at 1.07 a row, each head's second tile three quarters full, or 8 of 192 a head).
            q7, k7, v7 = make_inputs(32, 12, 12, 448, 448, 64, 64, torch.float16)
            assert "_packed<" in _kernel_name(q7, k7, v7)
        # Softcap: only variant 0 has an unmasked build with softcap code (192 rows at d64).
        assert ",m192," in _kernel_name(q3, k3, v3, softcap=5.0)
    elif kernel_path == "wgmma" and hopper:
        assert name.startswith("flash_fwd_wgmma<"), name
    else:
        assert name.startswith("flash_fwd<"), name


def test_path_names():
    native = ops._native()
    previous = native.attention_set_path("wgmma")
    try:
        assert native.attention_set_path("sm80") == "wgmma"
        assert native.attention_set_path("auto") == "sm80"
        with pytest.raises(ValueError, match="'auto', 'sm80' or 'wgmma'"):
            native.attention_set_path("tma")
    finally:
        native.attention_set_path(previous)

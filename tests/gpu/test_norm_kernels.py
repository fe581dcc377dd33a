"""GPU tests of the norm kernels through trt_fastops._C and trt_fastops.ops.

Every case compares all output elements with a float64 reference computed from
the same (rounded) inputs; outputs are filled with NaN before each run, so an
element the kernel forgets to write fails. Inputs are random with per-row means
and scales (mean subtraction matters), never zeros. Which kernel variant runs
is asserted for a set of cases so the row, warp, block, generic-smem and
generic-multipass paths are each covered (see plugins/norm/norm_launch.cu), and
every path is also forced through _C.norm_set_path and checked the same way.
"""
from __future__ import annotations

import contextlib
import math

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
_C = pytest.importorskip("trt_fastops._C")
from trt_fastops import ops  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# rtol/atol for y: two output ulps (the float64 reference and the kernel's float32
# result may round to neighbouring values) plus float32 math.
Y_TOL = {"float32": (1e-4, 1e-4), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)}
# the sum output: one rounding of x + skip + bias to the dtype.
SUM_TOL = {"float32": (1e-6, 1e-5), "float16": (1e-3, 1e-3), "bfloat16": (8e-3, 8e-3)}
STATS_TOL = (1e-4, 1e-5)

COLS = [1, 2, 3, 7, 31, 32, 33, 127, 128, 768, 1000, 1023, 1024, 1025, 2047, 2048, 4096, 5120,
        8192, 12288, 16384, 16385, 20000, 32768, 65536, 100003]
ROWS = [1, 2, 7, 64, 1003]
MAX_ELEMENTS = 1 << 23  # per sweep case, so the sweep stays fast


PATHS = ["warp", "warp_fit", "row", "block", "generic"]  # _C.norm_set_path's forced paths
# Mirror of kRowMaxRowsPerSm in plugins/norm/norm_launch.cu: the automatic choice takes
# the row path (CTA per row) up to this many rows per SM for 32 < cols / VEC <= 128.
ROW_MAX_ROWS_PER_SM = 128
A16 = 1 << 20  # a stand-in device address, 16-byte aligned: norm_kernel_name reads only alignment


def _cuda_ok():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


@contextlib.contextmanager
def _forced_path(path):
    """_C.norm_set_path(path) for the duration of the block (process-wide), then the previous setting."""
    prev = _C.norm_set_path(path)
    try:
        yield
    finally:
        _C.norm_set_path(prev)


@pytest.fixture(autouse=True)
def _auto_path():
    """Every test starts and ends on the automatic choice, whatever a failing test left."""
    _C.norm_set_path("auto")
    yield
    _C.norm_set_path("auto")


def _alloc(shape, dtype, misalign: bool):
    """Empty CUDA tensor of `shape`; misalign=True offsets it one element from an
    aligned allocation (contiguous, but not 16-byte aligned)."""
    n = math.prod(shape)
    base = torch.empty(n + 8, dtype=dtype, device="cuda")
    off = 1 if misalign else 0
    return base[off:off + n].view(shape)


def _fill(t, gen, mean=0.0, scale=1.0, row_stats=False):
    """Random values in place: normal(mean, scale); with row_stats each row gets its
    own mean in [-4, 4) and scale in [0.3, 3) on top."""
    v = torch.randn(t.shape, generator=gen, device="cuda", dtype=torch.float32) * scale + mean
    if row_stats and t.dim() == 2 and t.shape[0] > 0:
        rows = t.shape[0]
        m = torch.rand((rows, 1), generator=gen, device="cuda") * 8 - 4
        s = torch.rand((rows, 1), generator=gen, device="cuda") * 2.7 + 0.3
        v = v * s + m
    t.copy_(v)
    return t


def _nan_like(shape, dtype, misalign=False):
    t = _alloc(shape, dtype, misalign)
    t.fill_(float("nan"))
    return t


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def _run_case(kind, dtype_name, rows, cols, *, skip=None, bias=False, beta=None, gamma_scalar=False,
              beta_scalar=False, want_sum=False, want_stats=False, misalign=(), eps=1e-5, seed=0,
              expect_kernel=None):
    """Runs one case through _C.norm_forward and checks every output element.

    skip: None, "full" or "bcast" (skip has rows // 7 rows, or 1, broadcast over rows).
    misalign: names among x, skip, bias, gamma, beta, y, sum to offset by one element.
    """
    _cuda_ok()
    dt = DTYPES[dtype_name]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1000 + seed)
    if beta is None:
        beta = kind == "layer"
    x = _fill(_alloc((rows, cols), dt, "x" in misalign), gen, row_stats=True)
    skip_rows = 0
    sk = None
    if skip is not None:
        skip_rows = rows if skip == "full" else (7 if rows % 7 == 0 and rows > 7 else 1)
        sk = _fill(_alloc((skip_rows, cols), dt, "skip" in misalign), gen, mean=0.5, scale=1.5)
    bi = _fill(_alloc((cols,), dt, "bias" in misalign), gen, mean=-0.2, scale=0.3) if bias else None
    g = _fill(_alloc((1,) if gamma_scalar else (cols,), dt, "gamma" in misalign), gen, mean=1.0, scale=0.5)
    b = None
    if beta:
        b = _fill(_alloc((1,) if beta_scalar else (cols,), dt, "beta" in misalign), gen, mean=0.1, scale=0.5)
    y = _nan_like((rows, cols), dt, "y" in misalign)
    s_out = _nan_like((rows, cols), dt, "sum" in misalign) if want_sum else None
    mean_out = _nan_like((rows,), torch.float32) if want_stats and kind == "layer" else None
    rstd_out = _nan_like((rows,), torch.float32) if want_stats else None

    args = (kind, dtype_name, _ptr(x), _ptr(g), _ptr(y), rows, cols)
    kwargs = dict(skip=_ptr(sk), skip_rows=skip_rows, bias=_ptr(bi), beta=_ptr(b), gamma_scalar=gamma_scalar,
                  beta_scalar=beta_scalar, sum_out=_ptr(s_out), mean_out=_ptr(mean_out),
                  rstd_out=_ptr(rstd_out), epsilon=eps, stream=torch.cuda.current_stream().cuda_stream)
    name = _C.norm_kernel_name(*args, **kwargs)
    if expect_kernel is not None:
        assert name.startswith(expect_kernel), f"expected {expect_kernel}..., got {name}"
    _C.norm_forward(*args, **kwargs)
    torch.cuda.synchronize()

    # float64 reference from the same rounded inputs
    s = x.double()
    if sk is not None:
        s = s + sk.double().repeat(rows // skip_rows, 1)
    if bi is not None:
        s = s + bi.double()
    if kind == "layer":
        mean = s.mean(dim=1, keepdim=True)
    else:
        mean = torch.zeros((rows, 1), dtype=torch.float64, device="cuda")
    var = ((s - mean) ** 2).mean(dim=1, keepdim=True)
    rstd = 1.0 / torch.sqrt(var + eps)
    ref = (s - mean) * rstd * g.double()
    if b is not None:
        ref = ref + b.double()

    rtol, atol = Y_TOL[dtype_name]
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol, msg=lambda m: f"y ({name}): {m}")
    if s_out is not None:
        rtol, atol = SUM_TOL[dtype_name]
        torch.testing.assert_close(s_out.double(), s, rtol=rtol, atol=atol, msg=lambda m: f"sum ({name}): {m}")
    if mean_out is not None:
        torch.testing.assert_close(mean_out.double(), mean[:, 0], rtol=STATS_TOL[0], atol=STATS_TOL[1],
                                   msg=lambda m: f"mean ({name}): {m}")
    if rstd_out is not None:
        torch.testing.assert_close(rstd_out.double(), rstd[:, 0], rtol=STATS_TOL[0], atol=STATS_TOL[1],
                                   msg=lambda m: f"rstd ({name}): {m}")
    return name


def _sweep_rows(i, cols):
    rows = ROWS[i % len(ROWS)]
    return max(1, min(rows, MAX_ELEMENTS // cols))


@pytest.mark.parametrize("cols_index", range(len(COLS)), ids=[f"cols{c}" for c in COLS])
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_sweep(dtype, kind, cols_index):
    cols = COLS[cols_index]
    _run_case(kind, dtype, _sweep_rows(cols_index + len(dtype), cols), cols, seed=cols_index)


@pytest.mark.parametrize("rows", [1, 2, 7, 64, 1000, 1031, 2100, 4099])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_rows(dtype, rows):
    _run_case("layer", dtype, rows, 768, skip="full", want_sum=True, want_stats=True, seed=rows)
    _run_case("rms", dtype, rows, 4096, seed=rows + 1)


# The warp path loads bias / gamma / beta with the row on short grids (",early")
# and after the statistics on long ones: every feature on both, with the power-of-two
# items (4 at 768 halves) and the exactly fitting ones (warp_fit: 3).
@pytest.mark.parametrize("path,items", [("warp", 4), ("warp_fit", 3)])
@pytest.mark.parametrize("rows", [14, 8 * 132 + 7 * 40])
@pytest.mark.parametrize("feature", ["skip_bcast_bias_sum", "scalar_gamma_beta", "bias_no_beta"])
@pytest.mark.parametrize("kind", ["layer", "rms"])
def test_warp_early_and_late(kind, feature, rows, path, items):
    opts = dict(FEATURES[feature])
    if kind == "rms":
        opts.pop("beta", None)
        opts.pop("beta_scalar", None)
    with _forced_path(path):
        _run_case(kind, "float16", rows, 768, seed=rows, expect_kernel=f"norm_warp<float16,vec8,items{items}", **opts)
        x = torch.empty((rows, 768), dtype=torch.float16, device="cuda")
        name = _C.norm_kernel_name(kind, "float16", x.data_ptr(), x.data_ptr(), x.data_ptr(), rows, 768)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert name.endswith(",early>") == (rows <= 8 * sms), name


@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_rows_zero(dtype, kind):
    _cuda_ok()
    dt = DTYPES[dtype]
    x = torch.empty((0, 64), dtype=dt, device="cuda")
    g = torch.ones(64, dtype=dt, device="cuda")
    assert _C.norm_kernel_name(kind, dtype, x.data_ptr(), g.data_ptr(), 0, 0, 64) == "none"
    _C.norm_forward(kind, dtype, x.data_ptr(), g.data_ptr(), 0, 0, 64)  # null x/y are fine: nothing to do
    y = ops.layer_norm(x, g) if kind == "layer" else ops.rms_norm(x, g)
    assert y.shape == (0, 64)
    torch.cuda.synchronize()


FEATURE_COLS = [7, 33, 768, 1024, 4096, 12288, 16385, 65536, 100003]
FEATURES = {
    "skip_full_sum_stats": dict(skip="full", want_sum=True, want_stats=True),
    "skip_bcast_bias_sum": dict(skip="bcast", bias=True, want_sum=True),
    "scalar_gamma_beta": dict(gamma_scalar=True, beta_scalar=True, want_stats=True),
    "bias_no_beta": dict(bias=True, beta=False, want_stats=True),
    "misaligned_x": dict(misalign=("x",), want_stats=True),
    "misaligned_all": dict(skip="full", bias=True, want_sum=True,
                           misalign=("x", "skip", "bias", "gamma", "beta", "y", "sum")),
}


@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("cols", FEATURE_COLS)
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_features(dtype, kind, cols, feature):
    opts = dict(FEATURES[feature])
    if kind == "rms":
        opts.pop("beta", None)
        opts.pop("beta_scalar", None)
    rows = 14 if cols <= 20000 else 7  # both divisible by 7: broadcast skip has 7 rows
    expect = "norm_generic" if feature.startswith("misaligned") else None
    _run_case(kind, dtype, rows, cols, seed=cols, expect_kernel=expect, **opts)


# (dtype, cols, misalign, expected kernel prefix): every variant the launcher has.
# 21 rows: few rows per SM, so 32 < cols / VEC <= 128 takes the row path.
KERNEL_CASES = [
    ("float16", 256, (), "norm_warp<float16,vec8,items1"),
    ("float16", 264, (), "norm_row<float16,vec8,block64>"),
    ("float16", 512, (), "norm_row<float16,vec8,block64>"),
    ("bfloat16", 768, (), "norm_row<bfloat16,vec8,block96>"),
    ("float16", 1000, (), "norm_row<float16,vec8,block128>"),
    ("float16", 1024, (), "norm_row<float16,vec8,block128>"),
    ("float32", 128, (), "norm_warp<float32,vec4,items1"),
    ("float32", 512, (), "norm_row<float32,vec4,block128>"),
    ("float16", 2048, (), "norm_block<float16,vec8,items4,block64>"),
    ("bfloat16", 4096, (), "norm_block<bfloat16,vec8,items4,block128>"),
    ("float16", 5120, (), "norm_block<float16,vec8,items4,block256>"),
    ("float16", 8192, (), "norm_block<float16,vec8,items4,block256>"),
    ("float16", 16384, (), "norm_block<float16,vec8,items4,block512>"),
    ("bfloat16", 32768, (), "norm_block<bfloat16,vec8,items4,block1024>"),
    ("float32", 1024, (), "norm_block<float32,vec4,items4,block64>"),
    ("float32", 16384, (), "norm_block<float32,vec4,items4,block1024>"),
    ("float32", 32768, (), "norm_generic_smem<float32,block512>"),
    ("float16", 1025, (), "norm_generic_smem<float16,block128>"),
    ("float16", 7, (), "norm_generic_smem<float16,block128>"),
    ("float16", 4096, ("x",), "norm_generic_smem<float16,block128>"),
    ("float32", 1024, ("y",), "norm_generic_smem<float32,block128>"),
    ("bfloat16", 4096, ("gamma",), "norm_generic_smem<bfloat16,block128>"),
    ("float16", 4097, (), "norm_generic_smem<float16,block512>"),
    ("float16", 65536, (), "norm_generic_multipass<float16,block512>"),
    ("float32", 100003, (), "norm_generic_multipass<float32,block512>"),
]


@pytest.mark.parametrize("dtype,cols,misalign,expect", KERNEL_CASES,
                         ids=[f"{d}-{c}-{'-'.join(m) or 'aligned'}" for d, c, m, _ in KERNEL_CASES])
def test_kernel_choice(dtype, cols, misalign, expect):
    _run_case("layer", dtype, 21, cols, misalign=misalign, want_stats=True, seed=cols, expect_kernel=expect)


def test_auto_row_threshold():
    """The automatic choice by rows per SM and cols (only norm_kernel_name: nothing runs)."""
    _cuda_ok()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    limit = ROW_MAX_ROWS_PER_SM * sms

    def name(dtype, rows, cols, **kw):
        return _C.norm_kernel_name("layer", dtype, A16, A16, A16, rows, cols, **kw)

    skip = dict(skip=A16, skip_rows=1, bias=A16, beta=A16, sum_out=A16)  # BERT SkipLayerNorm
    for rows in (1, 128, 512, 4096, limit):
        assert name("float16", rows, 768, **skip) == "norm_row<float16,vec8,block96>", rows
    assert name("float16", limit + 1, 768, **skip).startswith("norm_warp<float16,vec8,items4,rows4>")
    assert name("float16", limit, 1024) == "norm_row<float16,vec8,block128>"
    assert name("float16", limit + 4, 1024).startswith("norm_warp<float16,vec8,items4")
    assert name("bfloat16", 64, 256).startswith("norm_warp<bfloat16,vec8,items1")  # one warp's worth: warp path
    assert name("float16", 64, 264) == "norm_row<float16,vec8,block64>"
    assert name("float32", 64, 768).startswith("norm_block<float32,vec4,items4,block64>")  # past the warp range
    assert name("float16", 64, 2048).startswith("norm_block<float16,vec8,items4,block64>")
    assert name("float16", 64, 768, skip=A16 + 2, skip_rows=1).startswith("norm_generic_smem")  # misaligned


def test_set_path_api():
    _cuda_ok()
    assert _C.norm_set_path("row") == "auto"
    for path in PATHS + ["auto"]:
        _C.norm_set_path(path)
    assert _C.norm_set_path("warp_fit") == "auto"
    assert _C.norm_set_path("auto") == "warp_fit"
    with pytest.raises(ValueError, match="norm_set_path: path must be"):
        _C.norm_set_path("fastest")
    assert _C.norm_set_path("auto") == "auto"  # a rejected name changes nothing


def _expected_kernel(path, dtype, rows, cols, misalign=()):
    """Kernel prefix norm_kernel_name must report with `path` forced; None where the
    path cannot run these arguments (then the automatic choice runs)."""
    vec = 4 if dtype == "float32" else 8
    if misalign or cols % vec:
        return "norm_generic" if path == "generic" else None
    nvec = cols // vec
    head = f"{dtype},vec{vec}"
    if path in ("warp", "warp_fit"):
        if nvec > 128:
            return None
        need = -(-nvec // 32)
        items = need if path == "warp_fit" else {1: 1, 2: 2, 3: 4, 4: 4}[need]
        return f"norm_warp<{head},items{items},rows4"
    if path == "row":
        return f"norm_row<{head},block{-(-nvec // 32) * 32}>" if nvec <= 256 else None
    if path == "block":
        block = 64
        while block * 4 < nvec:
            block *= 2
        return f"norm_block<{head},items4,block{block}>" if nvec <= 4096 else None
    return "norm_generic_smem<"


def _run_forced(path, kind, dtype, rows, cols, seed, **opts):
    expect = _expected_kernel(path, dtype, rows, cols, opts.get("misalign", ()))
    if expect is None:  # falls back: the automatic choice, by name
        x = _alloc((rows, cols), DTYPES[dtype], "x" in opts.get("misalign", ()))
        auto = _C.norm_kernel_name(kind, dtype, x.data_ptr(), A16, A16, rows, cols)
        with _forced_path(path):
            assert _C.norm_kernel_name(kind, dtype, x.data_ptr(), A16, A16, rows, cols) == auto
        expect = auto
    with _forced_path(path):
        return _run_case(kind, dtype, rows, cols, seed=seed, expect_kernel=expect, **opts)


# Every forced path at BERT's hidden size with every feature (the misaligned ones fall
# back to the generic path), on row counts that are not multiples of 32 or of 4.
@pytest.mark.parametrize("rows", [37, 1031])
@pytest.mark.parametrize("feature", list(FEATURES))
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("path", PATHS)
def test_forced_path_768(path, dtype, kind, feature, rows):
    opts = dict(FEATURES[feature])
    if kind == "rms":
        opts.pop("beta", None)
        opts.pop("beta_scalar", None)
    if feature == "skip_bcast_bias_sum":
        opts["want_stats"] = True
    _run_forced(path, kind, dtype, rows, 768, seed=rows + len(feature), **opts)


# Every forced path over column counts: one vector (row: one warp, no barrier), one
# warp's worth plus one (partial second warp), partial last warps at 520 / 1000
# halves, exact 1024, and 2048 (row path: 256 threads; warp path: falls back).
FORCED_COLS = [8, 264, 520, 768, 1000, 1024, 2048]


@pytest.mark.parametrize("cols", FORCED_COLS)
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("path", PATHS)
def test_forced_path_cols(path, dtype, kind, cols):
    _run_forced(path, kind, dtype, 63, cols, seed=cols, skip="bcast", bias=True, want_sum=True,
                want_stats=True, beta=kind == "layer")


# More rows than the grid cap (65536 CTAs): rows go grid-stride, and the row path's
# two shared arrays alternate between a CTA's rows (a race there shows as wrong stats).
@pytest.mark.parametrize("kind", ["layer", "rms"])
@pytest.mark.parametrize("cols", [264, 768])
def test_forced_row_grid_stride(kind, cols):
    _run_forced("row", kind, "float16", 2 * 65536 + 7 * 11, cols, seed=cols, skip="bcast", bias=True,
                want_sum=True, want_stats=True)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("cols", [1 << 20, (1 << 20) + 3])
def test_huge_rows(dtype, cols):
    _run_case("layer", dtype, 3, cols, skip="full", want_sum=True, want_stats=True, seed=cols,
              expect_kernel="norm_generic_multipass")
    _run_case("rms", dtype, 2, cols, bias=True, seed=cols + 1, expect_kernel="norm_generic_multipass")


@pytest.mark.parametrize("cols,expect", [(1024, "norm_warp"), (4096, "norm_block"), (100003, "norm_generic_multipass")])
def test_64bit_indexing(cols, expect):
    """More than 2**31 elements: row * cols overflows 32 bits for the last rows (and the
    grid is capped, so rows are visited grid-stride). Checks a sample of rows incl. the last."""
    _cuda_ok()
    rows = (1 << 31) // cols + 5
    need = rows * cols * 2 * 2 + (1 << 30)
    free, _ = torch.cuda.mem_get_info()
    if free < need:
        pytest.skip(f"needs {need / 2**30:.1f} GiB of GPU memory, {free / 2**30:.1f} free")
    dt = torch.float16
    x = torch.empty((rows, cols), dtype=dt, device="cuda").normal_(1.0, 2.0)
    sk = torch.empty((1, cols), dtype=dt, device="cuda").normal_(-0.5, 1.0)  # broadcast skip
    g = torch.empty(cols, dtype=dt, device="cuda").normal_(1.0, 0.3)
    b = torch.empty(cols, dtype=dt, device="cuda").normal_(0.0, 0.3)
    y = torch.full((rows, cols), float("nan"), dtype=dt, device="cuda")
    rstd_out = torch.full((rows,), float("nan"), dtype=torch.float32, device="cuda")
    args = ("layer", "float16", x.data_ptr(), g.data_ptr(), y.data_ptr(), rows, cols)
    kwargs = dict(skip=sk.data_ptr(), skip_rows=1, beta=b.data_ptr(), rstd_out=rstd_out.data_ptr())
    assert _C.norm_kernel_name(*args, **kwargs).startswith(expect)
    _C.norm_forward(*args, **kwargs)
    torch.cuda.synchronize()
    assert not torch.isnan(y).any().item(), "some output elements were not written"
    assert not torch.isnan(rstd_out).any().item()
    first_big = (1 << 31) // cols  # first row whose offset needs more than 31 bits
    sample = sorted({0, 1, rows // 2, first_big - 1, first_big, first_big + 1, rows - 2, rows - 1})
    idx = torch.tensor(sample, device="cuda")
    s = x[idx].double() + sk.double()
    mean = s.mean(dim=1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((s - mean) ** 2).mean(dim=1, keepdim=True) + 1e-5)
    ref = (s - mean) * rstd * g.double() + b.double()
    torch.testing.assert_close(y[idx].double(), ref, rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(rstd_out[idx].double(), rstd[:, 0], rtol=1e-4, atol=1e-5)
    del x, y


def test_invalid_arguments_raise():
    _cuda_ok()
    x = torch.ones((6, 64), dtype=torch.float16, device="cuda")
    g = torch.ones(64, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    sk = torch.ones((4, 64), dtype=torch.float16, device="cuda")
    m = torch.empty(6, dtype=torch.float32, device="cuda")
    cases = [
        dict(skip=sk.data_ptr(), skip_rows=4),  # 4 does not divide 6
        dict(skip=sk.data_ptr(), skip_rows=0),
        dict(mean_out=m.data_ptr(), kind="rms"),  # RMSNorm has no mean
        dict(gamma=0),
        dict(y=0),
        dict(cols=0),
        dict(cols=-5),
        dict(rows=-1),
    ]
    for case in cases:
        case = dict(case)
        kind = case.pop("kind", "layer")
        gamma = case.pop("gamma", g.data_ptr())
        yp = case.pop("y", y.data_ptr())
        cols = case.pop("cols", 64)
        rows = case.pop("rows", 6)
        args = (kind, "float16", x.data_ptr(), gamma, yp, rows, cols)
        assert _C.norm_kernel_name(*args, **case) == "invalid"
        with pytest.raises(RuntimeError, match="cudaErrorInvalidValue"):
            _C.norm_forward(*args, **case)
    with pytest.raises(ValueError, match="kind"):
        _C.norm_forward("batch", "float16", x.data_ptr(), g.data_ptr(), y.data_ptr(), 6, 64)
    with pytest.raises(ValueError, match="dtype"):
        _C.norm_forward("layer", "float64", x.data_ptr(), g.data_ptr(), y.data_ptr(), 6, 64)
    # the failed calls left no sticky error behind
    _run_case("layer", "float16", 6, 64)


def test_cuda_graph_capture():
    """The launcher neither synchronises nor allocates: it records into a CUDA graph,
    including a first use of a >48 KB shared-memory kernel on a fresh device attribute."""
    _cuda_ok()
    dt = torch.float16
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    cases = []
    for cols in (1024, 8192, 30001):  # row, block, generic smem (30001 * 4 bytes > 48 KB)
        x = _fill(torch.empty((33, cols), dtype=dt, device="cuda"), gen, row_stats=True)
        g = _fill(torch.empty(cols, dtype=dt, device="cuda"), gen, mean=1.0, scale=0.5)
        y = torch.full_like(x, float("nan"))
        cases.append((x, g, y, cols))
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for x, g, y, cols in cases:
            _C.norm_forward("rms", "float16", x.data_ptr(), g.data_ptr(), y.data_ptr(), 33, cols,
                            stream=torch.cuda.current_stream().cuda_stream)
    for _, _, y, _ in cases:
        y.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    for x, g, y, cols in cases:
        s = x.double()
        ref = s / torch.sqrt((s * s).mean(dim=1, keepdim=True) + 1e-5) * g.double()
        torch.testing.assert_close(y.double(), ref, rtol=2e-3, atol=2e-3)


def test_side_stream():
    _cuda_ok()
    gen = torch.Generator(device="cuda")
    gen.manual_seed(3)
    x = _fill(torch.empty((512, 4096), dtype=torch.bfloat16, device="cuda"), gen, row_stats=True)
    g = _fill(torch.empty(4096, dtype=torch.bfloat16, device="cuda"), gen, mean=1.0, scale=0.5)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = ops.layer_norm(x, g)
    torch.cuda.current_stream().wait_stream(side)
    ref = torch.nn.functional.layer_norm(x.double(), (4096,), g.double(), None, 1e-5)
    torch.testing.assert_close(y.double(), ref, rtol=1.6e-2, atol=1.6e-2)


# --- trt_fastops.ops wrappers ---------------------------------------------------------

def _t(shape, dtype, gen, mean=0.0, scale=1.0):
    return _fill(torch.empty(shape, dtype=dtype, device="cuda"), gen, mean, scale)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_ops_layer_norm(dtype):
    _cuda_ok()
    dt = DTYPES[dtype]
    rtol, atol = Y_TOL[dtype]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(11)
    x = _t((3, 5, 6, 64), dt, gen, mean=2.0, scale=1.5)
    w = _t((6, 64), dt, gen, mean=1.0, scale=0.5)
    b = _t((1, 6, 64), dt, gen, scale=0.5)  # leading 1s are fine
    skip = _t((5, 6, 64), dt, gen)  # broadcast over the leading dim
    sb = _t((6, 64), dt, gen, scale=0.2)
    y, mean, rstd, s = ops.layer_norm(x, w, b, 1e-6, skip=skip, skip_bias=sb, normalized_ndim=2,
                                      return_stats=True, return_sum=True)
    assert y.shape == x.shape and y.dtype == dt
    assert mean.shape == (3, 5, 1, 1) and rstd.shape == (3, 5, 1, 1) and mean.dtype == torch.float32
    s_ref = x.double() + skip.double() + sb.double()
    ref = torch.nn.functional.layer_norm(s_ref, (6, 64), w.double(), b.double()[0], 1e-6)
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol)
    torch.testing.assert_close(s.double(), s_ref, rtol=SUM_TOL[dtype][0], atol=SUM_TOL[dtype][1])
    torch.testing.assert_close(mean.double(), s_ref.mean(dim=(2, 3), keepdim=True), rtol=1e-4, atol=1e-5)
    # plain call returns one tensor; scalar weight and bias broadcast
    y1 = ops.layer_norm(x, w.new_full((1,), 0.5), w.new_full((1,), -1.0))
    ref1 = torch.nn.functional.layer_norm(x.double(), (64,), None, None, 1e-5) * 0.5 - 1.0
    torch.testing.assert_close(y1.double(), ref1, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_ops_rms_norm(dtype):
    _cuda_ok()
    dt = DTYPES[dtype]
    rtol, atol = Y_TOL[dtype]
    gen = torch.Generator(device="cuda")
    gen.manual_seed(12)
    x = _t((4, 7, 1000), dt, gen, mean=0.5, scale=2.0)
    w = _t((1000,), dt, gen, mean=1.0, scale=0.5)
    skip = _t((4, 7, 1000), dt, gen)
    y, s = ops.rms_norm(x, w, 1e-6, skip=skip, return_sum=True)
    s_ref = x.double() + skip.double()
    ref = s_ref * torch.rsqrt((s_ref * s_ref).mean(-1, keepdim=True) + 1e-6) * w.double()
    torch.testing.assert_close(y.double(), ref, rtol=rtol, atol=atol)
    torch.testing.assert_close(s.double(), s_ref, rtol=SUM_TOL[dtype][0], atol=SUM_TOL[dtype][1])
    if hasattr(torch.nn.functional, "rms_norm"):
        ref2 = torch.nn.functional.rms_norm(x.double(), (1000,), w.double(), 1e-6)
        torch.testing.assert_close(ops.rms_norm(x, w, 1e-6).double(), ref2, rtol=rtol, atol=atol)


def test_ops_errors():
    _cuda_ok()
    x = torch.ones((4, 64), dtype=torch.float16, device="cuda")
    w = torch.ones(64, dtype=torch.float16, device="cuda")
    with pytest.raises(ValueError, match="'x' is on cpu"):
        ops.layer_norm(x.cpu(), w)
    with pytest.raises(TypeError, match="'weight' is torch.float32, expected torch.float16"):
        ops.layer_norm(x, w.float())
    with pytest.raises(ValueError, match="not contiguous"):
        ops.layer_norm(x.t(), w)
    with pytest.raises(ValueError, match=r"'weight' has shape \[32\]"):
        ops.layer_norm(x, w[:32])
    with pytest.raises(ValueError, match="'skip' has shape"):
        ops.rms_norm(x, w, skip=torch.ones((2, 64), dtype=torch.float16, device="cuda"))
    with pytest.raises(ValueError, match="'skip_bias' has shape"):
        ops.rms_norm(x, w, skip=x, skip_bias=w[:1])
    with pytest.raises(ValueError, match="normalized_ndim"):
        ops.layer_norm(x, w, normalized_ndim=3)
    with pytest.raises(TypeError, match="expected float32, float16 or bfloat16"):
        ops.layer_norm(x.double(), w.double())
    with pytest.raises(ValueError, match="no element"):
        ops.layer_norm(torch.ones((4, 0), dtype=torch.float16, device="cuda"), w[:0])

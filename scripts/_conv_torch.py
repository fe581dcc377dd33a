"""Torch helpers shared by the conv GPU test, benchmark and sanitizer driver.

A ConvCase describes one Conv / ConvTranspose with ONNX semantics (asymmetric
pads, output_padding); `reference` computes it in float64 with torch's own
convolutions (explicit F.pad for asymmetric pads, full transposed output then
crop/extend), independently of trt_fastops; `run` drives trt_fastops._C's
conv launcher on raw pointers. Needs torch only when the functions are called.
"""
from __future__ import annotations

import dataclasses
import glob
import math
import os
from typing import Optional, Sequence

DTYPES = ("float32", "float16", "bfloat16")


def point_at_cudnn() -> Optional[str]:
    """trt_fastops dlopens libcudnn.so.9 by name (found when torch or ONNX Runtime already loaded it);
    where the nvidia-cudnn wheel is importable, name its library explicitly so the search cannot
    miss. Call before the first convolution is planned. Returns the path used, if any."""
    if os.environ.get("TRT_FASTOPS_CUDNN_LIBRARY"):
        return os.environ["TRT_FASTOPS_CUDNN_LIBRARY"]
    try:
        import nvidia.cudnn as cudnn_pkg  # the nvidia-cudnn-cu* wheel (a namespace package)
    except ImportError:
        return None
    for root in getattr(cudnn_pkg, "__path__", []):
        found = sorted(glob.glob(os.path.join(root, "lib", "libcudnn.so.9*")))
        if found:
            os.environ["TRT_FASTOPS_CUDNN_LIBRARY"] = found[0]
            return found[0]
    return None
ACTIVATIONS = ("none", "relu", "silu", "gelu")


@dataclasses.dataclass(frozen=True)
class ConvCase:
    name: str
    n: int
    c_in: int
    c_out: int
    in_shape: tuple
    kernel: tuple
    group: int = 1
    stride: Optional[tuple] = None
    dilation: Optional[tuple] = None
    pads_begin: Optional[tuple] = None
    pads_end: Optional[tuple] = None
    output_padding: Optional[tuple] = None
    transpose: bool = False
    activation: str = "none"
    bias: bool = True

    @property
    def spatial(self) -> int:
        return len(self.in_shape)

    def _v(self, v, fill):
        return tuple(v) if v is not None else (fill,) * self.spatial

    @property
    def strides(self):
        return self._v(self.stride, 1)

    @property
    def dilations(self):
        return self._v(self.dilation, 1)

    @property
    def pb(self):
        return self._v(self.pads_begin, 0)

    @property
    def pe(self):
        return self._v(self.pads_end, 0)

    @property
    def op(self):
        return self._v(self.output_padding, 0) if self.transpose else (0,) * self.spatial

    def out_shape(self) -> tuple:
        out = []
        for i in range(self.spatial):
            span = self.dilations[i] * (self.kernel[i] - 1) + 1
            if self.transpose:
                o = self.strides[i] * (self.in_shape[i] - 1) + self.op[i] + span - self.pb[i] - self.pe[i]
            else:
                o = (self.in_shape[i] + self.pb[i] + self.pe[i] - span) // self.strides[i] + 1
            out.append(o)
        return tuple(out)

    def fallback_gemm_kernel(self, dtype: str, x_aligned: bool = True) -> str:
        """The implicit-GEMM kernel plan_fallback picks for backend 'gemm' (name prefix)."""
        if dtype == "float32":
            return "gemm_simt"
        unpadded_1x1 = (all(k == 1 for k in self.kernel) and all(s == 1 for s in self.strides)
                        and not any(self.pb) and not any(self.pe))
        out_sp = 1
        for o in self.out_shape():
            out_sp *= o
        if not self.transpose and unpadded_1x1 and out_sp % 8 == 0 and x_aligned:
            return "gemm_pointwise"
        if (self.c_in // self.group) % 8 == 0 and self.c_in > 0:
            return "gemm_nhwc"
        return "gemm_mma"

    def weight_shape(self) -> tuple:
        if self.transpose:
            return (self.c_in, self.c_out // self.group) + tuple(self.kernel)
        return (self.c_out, self.c_in // self.group) + tuple(self.kernel)

    def x_shape(self) -> tuple:
        return (self.n, self.c_in) + tuple(self.in_shape)

    def y_shape(self) -> tuple:
        return (self.n, self.c_out) + self.out_shape()

    def macs(self) -> int:
        """Multiply-adds of the convolution (useful ones: no padding taps subtracted)."""
        if self.transpose:
            return self.n * self.c_in * math.prod(self.in_shape) * (self.c_out // self.group) * math.prod(self.kernel)
        return self.n * self.c_out * math.prod(self.out_shape()) * (self.c_in // self.group) * math.prod(self.kernel)

    def describe(self) -> str:
        kind = "ConvT" if self.transpose else "Conv"
        return (f"{kind} x{list(self.x_shape())} w{list(self.weight_shape())} g{self.group} s{list(self.strides)} "
                f"d{list(self.dilations)} p{list(self.pb)}-{list(self.pe)}"
                + (f" op{list(self.op)}" if self.transpose else "")
                + (" bias" if self.bias else "") + ("" if self.activation == "none" else f" {self.activation}"))


def alloc(torch, shape, dtype, misalign: bool = False):
    """Contiguous CUDA tensor; misalign=True starts it one element past an aligned allocation."""
    n = math.prod(shape)
    base = torch.empty(n + 16, dtype=dtype, device="cuda")
    off = 1 if misalign else 0
    return base[off:off + n].view(shape)


def make_inputs(torch, case: ConvCase, dtype: str, seed: int, misalign: Sequence[str] = ()):
    """Random x, w, bias (never zero-filled) in `dtype`; names in misalign get an odd offset."""
    dt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)

    def rnd(shape, scale, key):
        t = alloc(torch, shape, dt, key in misalign)
        t.copy_(torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32) * scale)
        return t

    fan_in = max(1, (case.c_in // case.group) * math.prod(case.kernel))
    x = rnd(case.x_shape(), 1.0, "x")
    w = rnd(case.weight_shape(), 1.0 / math.sqrt(fan_in), "w")
    b = rnd((case.c_out,), 0.5, "bias") if case.bias else None
    return x, w, b


def _activation(torch, v, name):
    F = torch.nn.functional
    if name == "relu":
        return torch.relu(v)
    if name == "silu":
        return F.silu(v)
    if name == "gelu":
        return F.gelu(v)  # exact erf form
    return v


def reference(torch, case: ConvCase, x, w, b, absolute: bool = False):
    """float64 ONNX Conv / ConvTranspose (+ bias, activation). absolute=True: the same
    convolution of |x|, |w|, |b| without activation (the scale of rounding errors)."""
    F = torch.nn.functional
    x = x.double()
    w = w.double()
    b = b.double() if b is not None else None
    if absolute:
        x, w = x.abs(), w.abs()
        b = b.abs() if b is not None else None
    sp = case.spatial
    if case.c_in == 0 or case.n == 0:
        y = torch.zeros(case.y_shape(), dtype=torch.float64, device="cuda")
    elif not case.transpose:
        conv = (F.conv1d, F.conv2d, F.conv3d)[sp - 1]
        pad = []
        for i in reversed(range(sp)):  # F.pad lists the last dim first
            pad += [case.pb[i], case.pe[i]]
        y = conv(F.pad(x, pad), w, None, stride=case.strides, padding=0, dilation=case.dilations,
                 groups=case.group)
    else:
        convt = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[sp - 1]
        full = convt(x, w, None, stride=case.strides, padding=0, output_padding=0, groups=case.group,
                     dilation=case.dilations)
        # full[o'] with o' = p*s + r*d; ONNX y[o] = full[o + pad_begin] (zero past the end).
        extend = []
        for i in reversed(range(sp)):
            extend += [0, case.op[i]]
        full = F.pad(full, extend)
        index = [slice(None), slice(None)]
        for i in range(sp):
            index.append(slice(case.pb[i], case.pb[i] + case.out_shape()[i]))
        y = full[tuple(index)]
        assert tuple(y.shape) == case.y_shape(), (y.shape, case.y_shape())
    if b is not None:
        y = y + b.view((1, -1) + (1,) * sp)
    return y if absolute else _activation(torch, y, case.activation)


def conv_kwargs(case: ConvCase, dtype: str, x, w, b, y, stream: int = 0, backend: str = "auto") -> dict:
    return dict(dtype=dtype, x=x.data_ptr(), w=w.data_ptr(), y=y.data_ptr(), n=case.n, c_in=case.c_in,
                c_out=case.c_out, in_shape=list(case.in_shape), out_shape=list(case.out_shape()),
                kernel_shape=list(case.kernel), bias=b.data_ptr() if b is not None else 0, group=case.group,
                strides=list(case.strides), dilations=list(case.dilations), pads_begin=list(case.pb),
                pads_end=list(case.pe), output_padding=list(case.op), transpose=case.transpose,
                activation=case.activation, backend=backend, stream=stream)


class Workspaces:
    """Grows one device buffer per stream so repeated calls reuse it."""

    def __init__(self, torch):
        self.torch = torch
        self.buffers = {}

    def get(self, nbytes: int, stream: int = 0):
        buf = self.buffers.get(stream)
        if buf is None or buf.numel() < nbytes:
            buf = self.torch.empty(max(nbytes, 256), dtype=self.torch.uint8, device="cuda")
            self.buffers[stream] = buf
        return buf


def run(torch, _C, case: ConvCase, dtype: str, x, w, b, y, backend: str = "auto", stream: int = 0,
        workspaces: Optional[Workspaces] = None, poison_after_plan: bool = True) -> dict:
    """Plans (cache) and runs the convolution into y on `stream`. Planning may run the
    convolution (autotuning), so y is poisoned again after planning: the checked output
    is the one conv_forward wrote."""
    kw = conv_kwargs(case, dtype, x, w, b, y, stream=stream, backend=backend)
    info = _C.conv_plan(**kw)
    if poison_after_plan and y.numel():
        with torch.cuda.stream(torch.cuda.ExternalStream(stream)) if stream else _null():
            y.fill_(float("nan"))
    ws = (workspaces or Workspaces(torch)).get(info["workspace_bytes"], stream)
    return _C.conv_forward(**kw, workspace=ws.data_ptr(), workspace_bytes=ws.numel())


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# Error bound: |y - ref| <= RTOL * |ref| + (ACC + RTOL) * conv(|x|, |w|) + |b|, times a margin
# for the activation's slope. RTOL: two output roundings (half an ulp each; a cuDNN plan with
# a separate epilogue rounds the convolution before bias/activation). ACC: float32 accumulation,
# and for 16-bit types also cuDNN algorithms that transform inputs (Winograd / FFT) in reduced
# precision.
RTOL = {"float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}
ACC = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 8e-3}
ATOL = {"float32": 0.0, "float16": 1.2e-7, "bfloat16": 0.0}  # fp16 subnormal spacing
MARGIN = 1.5


def max_error_ratio(torch, y, ref, ref_abs, dtype: str) -> float:
    """max |y - ref| / bound over all elements (<= 1 passes); inf for NaN (an element never written)."""
    if y.numel() == 0:
        return 0.0
    yd = y.double()
    if torch.isnan(yd).any() and not torch.isnan(ref).any():
        return float("inf")
    bound = MARGIN * (RTOL[dtype] * ref.abs() + (ACC[dtype] + RTOL[dtype]) * ref_abs) + ATOL[dtype] + 1e-30
    return float(((yd - ref).abs() / bound).max().item())

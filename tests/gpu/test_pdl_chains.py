"""Programmatic dependent launch (plugins/common/pdl.h): chains of our kernels on one stream.

The norm kernels, the Hopper attention kernel and Dense's sm_90a GEMM are launched with PDL on
compute capability 9.0, so each may start while the kernel before it finishes and must wait
(griddepcontrol.wait) before touching memory. These chains read what the previous kernel wrote
(read after write) and overwrite what it is still reading (write after read), BERT's order
included (norm -> GELU GEMM -> GEMM -> norm), with the intermediate buffers poisoned (NaN) before
each round. The result of the queued chain must equal, bit for bit, the same chain run with a
device synchronisation after every launch (where nothing can overlap).
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
_C = pytest.importorskip("trt_fastops._C")


def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")


def _norm(x, g, b, y, *, skip=None, stream):
    rows, cols = x.shape
    _C.norm_forward("layer", "float16", x.data_ptr(), g.data_ptr(), y.data_ptr(), rows, cols,
                    skip=0 if skip is None else skip.data_ptr(), skip_rows=0 if skip is None else rows,
                    beta=b.data_ptr(), epsilon=1e-5, stream=stream)


def _dense(x, w, bias, y, activation, ws, stream):
    (m, k), n = x.shape, w.shape[1]
    _C.dense_forward("float16", x.data_ptr(), w.data_ptr(), y.data_ptr(), m, n, k, bias=bias.data_ptr(),
                     activation=activation, workspace=ws.data_ptr(), workspace_bytes=ws.numel(), stream=stream)


def _run_chain(bufs, params, rounds, sync):
    a, h, u, d = bufs["a"], bufs["h"], bufs["u"], bufs["d"]
    stream = torch.cuda.current_stream().cuda_stream
    step = torch.cuda.synchronize if sync else (lambda: None)
    for _ in range(rounds):
        h.fill_(float("nan"))
        u.fill_(float("nan"))
        d.fill_(float("nan"))
        step()
        _norm(a, params["g1"], params["b1"], h, stream=stream)                        # h = LN(a)
        step()
        _dense(h, params["w1"], params["c1"], u, "gelu", params["ws"], stream)        # u = GELU(h W1 + c1)
        step()
        _dense(u, params["w2"], params["c2"], d, "none", params["ws"], stream)        # d = u W2 + c2
        step()
        _norm(d, params["g2"], params["b2"], a, skip=h, stream=stream)                # a = LN(d + h): a was read
        step()
    torch.cuda.synchronize()
    return a.clone()


@pytest.mark.parametrize("rows", [128, 512, 4096])
def test_bert_like_chain_matches_synchronised(rows):
    """norm -> Dense(gelu) -> Dense -> SkipLayerNorm, 6 rounds, queued vs synchronised: identical."""
    _cuda()
    gen = torch.Generator(device="cuda").manual_seed(rows)
    hidden, inner = 768, 3072

    def rnd(*shape, scale=1.0, mean=0.0):
        return (torch.randn(*shape, generator=gen, device="cuda") * scale + mean).half()

    params = {"g1": rnd(hidden, scale=0.2, mean=1.0), "b1": rnd(hidden, scale=0.1),
              "g2": rnd(hidden, scale=0.2, mean=1.0), "b2": rnd(hidden, scale=0.1),
              "w1": rnd(hidden, inner, scale=hidden ** -0.5), "c1": rnd(inner, scale=0.1),
              "w2": rnd(inner, hidden, scale=inner ** -0.5), "c2": rnd(hidden, scale=0.1),
              "ws": torch.empty(_C.dense_workspace_bytes(), dtype=torch.uint8, device="cuda")}
    start = rnd(rows, hidden, scale=1.5, mean=0.3)

    def fresh():
        return {"a": start.clone(), "h": torch.empty(rows, hidden, dtype=torch.half, device="cuda"),
                "u": torch.empty(rows, inner, dtype=torch.half, device="cuda"),
                "d": torch.empty(rows, hidden, dtype=torch.half, device="cuda")}

    want = _run_chain(fresh(), params, 6, sync=True)
    assert torch.isfinite(want).all()
    for _ in range(3):
        got = _run_chain(fresh(), params, 6, sync=False)
        assert torch.equal(got, want), f"queued chain differs: max |diff| {(got.float() - want.float()).abs().max()}"


def test_norm_chain_long_then_short():
    """A long norm grid followed by short ones that read its output and overwrite its input."""
    _cuda()
    gen = torch.Generator(device="cuda").manual_seed(7)
    big = (torch.randn(65536, 768, generator=gen, device="cuda") * 2 + 0.5).half()
    g = (torch.randn(768, generator=gen, device="cuda") * 0.2 + 1).half()
    b = (torch.randn(768, generator=gen, device="cuda") * 0.1).half()
    stream = torch.cuda.current_stream().cuda_stream

    def chain(sync):
        x, y = big.clone(), torch.full_like(big, float("nan"))
        for _ in range(4):
            _norm(x, g, b, y, stream=stream)                       # long: 65536 rows
            if sync:
                torch.cuda.synchronize()
            _norm(y[:128], g, b, x[:128], skip=x[128:256], stream=stream)  # short: reads y, writes x
            if sync:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return x, y

    want = chain(True)
    for _ in range(3):
        got = chain(False)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])

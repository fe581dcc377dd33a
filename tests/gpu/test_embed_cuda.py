"""EmbedLayerNorm on the GPU: the kernel through _C.embed_norm_forward against a float64
reference (random tables, never zero; Y poisoned with NaN before every run), its NaN rows for
indices out of range, the grid-stride and uncached paths, and the op in ONNX Runtime's CUDA EP
(the rewritten BERT against ONNX Runtime on the original graph, plain and in a CUDA graph).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
_C = pytest.importorskip("trt_fastops._C")

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {"float32": 3e-5, "float16": 4e-3, "bfloat16": 3e-2}  # |y| is O(1): a few output ulps


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def case(dtype, *, batch=2, seq=7, hidden=768, vocab=50, positions=16, types=2, segment=True, beta=True,
         position_ids=None, index=torch.int64, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def table(rows, scale=1.0):
        t = torch.randn(rows, hidden, generator=g, device="cuda") * scale + 0.01
        return t.to(TORCH[dtype])

    f = {"ids": torch.randint(-vocab, vocab, (batch, seq), generator=g, device="cuda").to(index),
         "word": table(vocab), "position": table(positions, 0.5),
         "gamma": (1 + 0.1 * torch.randn(hidden, generator=g, device="cuda")).to(TORCH[dtype])}
    if segment:
        f["segment_ids"] = torch.randint(0, types, (batch, seq), generator=g, device="cuda").to(torch.int32)
        f["segment"] = table(types, 0.3)
    if beta:
        f["beta"] = (0.1 * torch.randn(hidden, generator=g, device="cuda")).to(TORCH[dtype])
    if position_ids is not None:
        f["position_ids"] = torch.randint(0, positions, (position_ids, seq), generator=g, device="cuda").to(index)
    return f


def reference(f, eps):
    ids = f["ids"].long()
    batch, seq = ids.shape
    e = f["word"].double()[ids % f["word"].shape[0]]
    pos = f["position_ids"].long() if "position_ids" in f else torch.arange(seq, device="cuda")[None]
    e = e + f["position"].double()[pos.expand(batch, seq)]
    if "segment_ids" in f:
        e = e + f["segment"].double()[f["segment_ids"].long()]
    mean = e.mean(-1, keepdim=True)
    y = (e - mean) / torch.sqrt(((e - mean) ** 2).mean(-1, keepdim=True) + eps) * f["gamma"].double()
    return y + f["beta"].double() if "beta" in f else y


def run(f, dtype, eps=1e-5):
    batch, seq = f["ids"].shape
    hidden = f["word"].shape[1]
    y = torch.full((batch, seq, hidden), float("nan"), device="cuda", dtype=TORCH[dtype])
    name = {torch.int64: "int64", torch.int32: "int32"}
    kw = {}
    if "segment_ids" in f:
        kw.update(segment_ids=f["segment_ids"].data_ptr(), segment=f["segment"].data_ptr(),
                  segment_rows=f["segment"].shape[0], segment_type=name[f["segment_ids"].dtype])
    if "position_ids" in f:
        kw.update(position_ids=f["position_ids"].data_ptr(), position_id_rows=f["position_ids"].shape[0],
                  position_type=name[f["position_ids"].dtype])
    if "beta" in f:
        kw["beta"] = f["beta"].data_ptr()
    stream = torch.cuda.current_stream()
    _C.embed_norm_forward(dtype, f["ids"].data_ptr(), f["word"].data_ptr(), f["position"].data_ptr(),
                          f["gamma"].data_ptr(), y.data_ptr(), batch, seq, hidden, f["word"].shape[0],
                          f["position"].shape[0], ids_type=name[f["ids"].dtype], epsilon=eps,
                          stream=stream.cuda_stream, **kw)
    torch.cuda.synchronize()
    return y


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("hidden", [768, 37, 4100, 13000])  # 13000: the row does not fit the cache
@pytest.mark.parametrize("variant", ["full", "plain", "position_ids_1", "position_ids_b", "int32"])
def test_embed_norm_kernel(dtype, hidden, variant):
    kw = {"plain": {"segment": False, "beta": False}, "position_ids_1": {"position_ids": 1},
          "position_ids_b": {"position_ids": 2}, "int32": {"index": torch.int32}}.get(variant, {})
    f = case(dtype, hidden=hidden, seed=hidden, **kw)
    y = run(f, dtype, eps=1e-6)
    assert not torch.isnan(y).any()
    torch.testing.assert_close(y.double(), reference(f, 1e-6), rtol=TOL[dtype], atol=TOL[dtype])


def test_embed_norm_kernel_bad_index_row_is_nan():
    f = case("float16", seed=3)
    f["ids"][1, 4] = 50  # the word table has 50 rows: [-50, 50)
    f["segment_ids"][0, 2] = -3  # 2 rows: [-2, 2)
    y = run(f, "float16")
    bad = torch.zeros(2, 7, dtype=torch.bool, device="cuda")
    bad[1, 4] = bad[0, 2] = True
    assert torch.isnan(y[bad]).all() and not torch.isnan(y[~bad]).any()
    f["ids"][1, 4] = 0
    f["segment_ids"][0, 2] = 0
    torch.testing.assert_close(y[~bad].double(), reference(f, 1e-5)[~bad], rtol=4e-3, atol=4e-3)


def test_embed_norm_kernel_grid_stride():
    """More tokens than CTAs in one grid (65536): the kernel loops."""
    f = case("float16", batch=3, seq=30000, hidden=16, vocab=7, positions=40, position_ids=3, seed=4)
    y = run(f, "float16")
    torch.testing.assert_close(y.double(), reference(f, 1e-5), rtol=4e-3, atol=4e-3)


def test_embed_norm_kernel_refuses_inconsistent_params():
    f = case("float32", position_ids=2)
    with pytest.raises(RuntimeError, match="cudaErrorInvalidValue"):
        _C.embed_norm_forward("float32", f["ids"].data_ptr(), f["word"].data_ptr(), f["position"].data_ptr(),
                              f["gamma"].data_ptr(), f["word"].data_ptr(), 2, 7, 768, 50, 16,
                              position_ids=f["position_ids"].data_ptr(), position_id_rows=3)
    with pytest.raises(ValueError, match="ids_type must be 'int32' or 'int64'"):
        _C.embed_norm_forward("float32", 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ids_type="int16")


# ---------------------------------------------------------------------------
# ONNX Runtime's CUDA EP


@pytest.mark.parametrize("cuda_graph", [False, True])
def test_rewritten_bert_on_cuda(ort_cuda, cuda_graph):
    from models import build as B

    from trt_fastops import rewrite
    from trt_fastops.runtime import OrtModel

    model = B.build("bert_tiny_dynamic", dtype="float16", seed=0)
    ours = rewrite(model, target="ort")
    assert ours.report.counts().get("EmbedLayerNorm") == 1
    feeds = B.example_inputs(model, seed=2, dims={"batch": 2, "sequence": 16})
    ref = ort_cuda.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    runner = OrtModel(ours.model, 0, cuda_graph=cuda_graph)
    for _ in range(3):  # warm-up, capture, replays
        got = runner.run(feeds)
    assert runner.graphs_enabled == cuda_graph
    for r, name in zip(ref, runner.output_names):
        np.testing.assert_allclose(np.asarray(got[name], np.float32), np.asarray(r, np.float32), rtol=2e-2, atol=2e-2)

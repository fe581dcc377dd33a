"""The native CUDA-graph cache (plugins/common/graph_cache.h) through trt_fastops._C, on our own
kernels: the norm launcher (_C.norm_forward) and the probe kernel (_C.graph_probe, which can
launch thread-block clusters). Independent of TensorRT and ONNX Runtime.

Each test: inputs random (never zeros), outputs poisoned with NaN before every run, results
against float64 references. torch only allocates and fills memory; the work runs on a
_C.CudaStream, so the tests synchronise torch's stream before a run and the cache's stream
after it.
"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
_C = pytest.importorskip("trt_fastops._C")

COLS = 256
EPS = 1e-5


@pytest.fixture(autouse=True)
def _cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def rand(rows, cols=COLS, *, device=0, seed=0):
    gen = torch.Generator(device=f"cuda:{device}")
    gen.manual_seed(seed)
    x = torch.randn((rows, cols), generator=gen, device=f"cuda:{device}", dtype=torch.float32)
    return x * 2.0 + 0.5  # a row mean to subtract


class Norm:
    """One LayerNorm problem: x, gamma, beta, y (float32) on a device."""

    def __init__(self, rows, *, device=0, seed=0):
        self.rows, self.device = rows, device
        self.x = rand(rows, device=device, seed=seed)
        self.g = rand(1, device=device, seed=seed + 1).reshape(COLS) * 0.3 + 1.0
        self.b = rand(1, device=device, seed=seed + 2).reshape(COLS) * 0.1
        self.y = torch.full_like(self.x, float("nan"))

    @property
    def shapes(self):
        return [list(self.x.shape), list(self.y.shape)]

    @property
    def addresses(self):
        return [self.x.data_ptr(), self.y.data_ptr()]

    def enqueue(self, kind="layer", y=None):
        y = self.y if y is None else y

        def fn(stream):
            _C.norm_forward(kind, "float32", self.x.data_ptr(), self.g.data_ptr(), y.data_ptr(), self.rows, COLS,
                            beta=self.b.data_ptr() if kind == "layer" else 0, epsilon=EPS, stream=stream)

        return fn

    def poison(self):
        self.y.fill_(float("nan"))

    def reference(self, kind="layer"):
        x = self.x.double()
        if kind == "rms":
            return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * self.g.double()
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + EPS) * self.g.double() + self.b.double()

    def check(self, y=None, kind="layer"):
        y = self.y if y is None else y
        torch.testing.assert_close(y.double(), self.reference(kind), rtol=1e-4, atol=1e-4)


def run(cache, stream, prob, *, enqueue=None, shapes=None, addresses=None):
    torch.cuda.synchronize(prob.device)  # inputs written by torch are complete
    how = cache.run(prob.device, shapes or prob.shapes, addresses or prob.addresses, enqueue or prob.enqueue(),
                    stream.handle)
    stream.synchronize()
    return how


def test_capture_then_replay_reads_current_data():
    stream, cache = _C.CudaStream(0), _C.GraphCache(4)
    p = Norm(64, seed=10)
    assert run(cache, stream, p) == "captured"
    p.check()
    assert cache.contains(0, p.shapes) and cache.would_replay(0, p.shapes, p.addresses)
    for i in range(3):
        p.x.copy_(rand(64, seed=20 + i))  # same address, new values
        p.poison()
        assert run(cache, stream, p) == "replayed"
        p.check()
    s = cache.stats()
    assert (s["captures"], s["replays"], s["launches"], s["size"]) == (1, 3, 4, 1)
    assert (s["updates"], s["update_refusals"], s["cluster_reinstantiations"]) == (0, 0, 0)


def test_address_change_updates_in_place():
    stream, cache = _C.CudaStream(0), _C.GraphCache(4)
    a, b = Norm(64, seed=30), Norm(64, seed=40)  # same shapes, other buffers
    assert run(cache, stream, a) == "captured"
    a.check()
    a.poison()
    assert not cache.would_replay(0, b.shapes, b.addresses)
    assert run(cache, stream, b) == "updated"
    b.check()
    assert torch.isnan(a.y).all(), "the updated graph still wrote the old output buffer"
    assert run(cache, stream, b) == "replayed"
    b.check()
    assert run(cache, stream, a) == "updated"  # and back
    a.check()
    s = cache.stats()
    assert (s["captures"], s["updates"], s["update_refusals"], s["size"]) == (3, 2, 0, 1)


def test_new_shape_is_a_new_entry_and_eviction_is_lru():
    stream, cache = _C.CudaStream(0), _C.GraphCache(2)
    p64, p48, p80 = Norm(64, seed=50), Norm(48, seed=51), Norm(80, seed=52)
    assert run(cache, stream, p64) == "captured"
    assert run(cache, stream, p48) == "captured"
    assert len(cache) == 2
    p64.poison()
    assert run(cache, stream, p64) == "replayed"  # p64 is now the most recently used
    p64.check()
    assert run(cache, stream, p80) == "captured"  # evicts p48
    s = cache.stats()
    assert (s["size"], s["evictions"]) == (2, 1)
    assert not cache.contains(0, p48.shapes) and cache.contains(0, p64.shapes) and cache.contains(0, p80.shapes)
    p48.poison()
    assert run(cache, stream, p48) == "captured"  # evicts p64
    for p in (p48, p80):
        p.check()
    assert not cache.contains(0, p64.shapes)
    cache.clear()
    assert len(cache) == 0
    p80.poison()
    assert run(cache, stream, p80) == "captured"
    p80.check()


def test_refused_update_reinstantiates():
    """Same key, one kernel node more: cudaGraphExecUpdate refuses the topology change."""
    stream, cache = _C.CudaStream(0), _C.GraphCache(2)
    p = Norm(32, seed=60)
    y2 = torch.full_like(p.y, float("nan"))
    assert run(cache, stream, p) == "captured"
    p.check()

    def two_kernels(s):
        p.enqueue("layer")(s)
        p.enqueue("rms", y=y2)(s)

    p.poison()
    how = run(cache, stream, p, enqueue=two_kernels, addresses=p.addresses + [y2.data_ptr()])
    assert how == "reinstantiated"
    p.check()
    p.check(y2, kind="rms")
    s = cache.stats()
    assert (s["update_refusals"], s["updates"], s["size"]) == (1, 0, 1)
    p.poison()
    y2.fill_(float("nan"))
    assert run(cache, stream, p, enqueue=two_kernels, addresses=p.addresses + [y2.data_ptr()]) == "replayed"
    p.check()
    p.check(y2, kind="rms")


@pytest.mark.parametrize("cluster", [1, 2])
def test_probe_kernel_clusters_are_reinstantiated_not_updated(cluster):
    if cluster > 1 and torch.cuda.get_device_capability(0) < (9, 0):
        pytest.skip("thread-block clusters need compute capability 9.0")
    stream, cache = _C.CudaStream(0), _C.GraphCache(2)
    n = 3 * 256 * 4 + 17
    bufs = [(rand(1, n, seed=70 + i).reshape(n), torch.full((n,), float("nan"), device="cuda:0")) for i in range(2)]

    def launch(x, y):
        return lambda s: _C.graph_probe(x.data_ptr(), y.data_ptr(), n, a=1.5, b=-0.25, cluster=cluster, stream=s)

    results = []
    for x, y in bufs:
        torch.cuda.synchronize()
        results.append(cache.run(0, [[n]], [x.data_ptr(), y.data_ptr()], launch(x, y), stream.handle))
        stream.synchronize()
        torch.testing.assert_close(y.double(), x.double() * 1.5 - 0.25, rtol=1e-6, atol=1e-6)
    assert cache.uses_clusters(0, [[n]]) == (cluster > 1)
    s = cache.stats()
    if cluster > 1:
        assert results == ["captured", "reinstantiated"]
        assert (s["cluster_reinstantiations"], s["updates"]) == (1, 0)
    else:
        assert results == ["captured", "updated"]
        assert (s["cluster_reinstantiations"], s["updates"]) == (0, 1)


def test_callback_errors_propagate_and_leave_the_cache_usable():
    stream, cache = _C.CudaStream(0), _C.GraphCache(2)
    p = Norm(16, seed=80)

    class Boom(Exception):
        pass

    def raises(s):
        raise Boom("from the callback")

    with pytest.raises(Boom, match="from the callback"):
        run(cache, stream, p, enqueue=raises)
    assert len(cache) == 0

    def synchronises(s):  # not capturable: cudaStreamSynchronize on the capturing stream
        p.enqueue()(s)
        stream.synchronize()

    with pytest.raises(RuntimeError):
        run(cache, stream, p, enqueue=synchronises)
    assert len(cache) == 0

    def bad_launch(s):  # the launcher refuses (rows < 0): a RuntimeError from norm_forward
        _C.norm_forward("layer", "float32", p.x.data_ptr(), p.g.data_ptr(), p.y.data_ptr(), -1, COLS, stream=s)

    with pytest.raises(RuntimeError, match="cudaErrorInvalidValue"):
        run(cache, stream, p, enqueue=bad_launch)
    # The stream is not left capturing and no sticky error remains: a normal capture works.
    p.poison()
    assert run(cache, stream, p) == "captured"
    p.check()
    s = cache.stats()
    assert (s["size"], s["launches"]) == (1, 1)


def test_devices_are_separate_keys():
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    cache = _C.GraphCache(4)
    streams = {d: _C.CudaStream(d) for d in (0, 1)}
    probs = {d: Norm(64, device=d, seed=90 + d) for d in (0, 1)}
    for d in (0, 1):
        assert run(cache, streams[d], probs[d]) == "captured"
        probs[d].check()
    assert len(cache) == 2
    for d in (0, 1):
        probs[d].poison()
        assert run(cache, streams[d], probs[d]) == "replayed"
        probs[d].check()


def test_device_buffer_stream_and_copies():
    buf = _C.DeviceBuffer(0, 4096)
    assert buf.ptr != 0 and buf.nbytes == 4096 and buf.device == 0
    assert _C.pointer_device(buf.ptr) == 0
    src = rand(1, 1024, seed=100).reshape(1024)
    torch.cuda.synchronize()
    _C.copy_bytes(buf.ptr, src.data_ptr(), 4096, device=0)
    back = torch.full_like(src, float("nan"))
    s = _C.CudaStream(0)
    _C.copy_bytes(back.data_ptr(), buf.ptr, 4096, device=0, stream=s.handle, wait=False)
    s.synchronize()
    torch.testing.assert_close(back, src, rtol=0, atol=0)
    host = torch.empty(1024, dtype=torch.float32)
    _C.copy_bytes(host.data_ptr(), buf.ptr, 4096, device=0)
    torch.testing.assert_close(host, src.cpu(), rtol=0, atol=0)
    assert _C.pointer_device(host.data_ptr()) == -1
    _C.device_synchronize(0)


def test_stage_copies_mixed_sources():
    """OrtModel's input staging: device sources (one batched kernel per 8 copies, so 9 of them
    take two launches; unaligned ends and odd sizes; one copy large enough to loop grid-stride)
    and host sources (cudaMemcpyAsync) in one call: every byte lands, nothing past a span is
    touched."""
    gen = torch.Generator(device="cuda:0")
    gen.manual_seed(7)
    sizes = [1, 15, 16, 17, 1000, 4096, 12345, 3, 64, 5 << 20, 4 << 20, 33]  # bytes
    offsets = [0, 1, 0, 3, 8, 0, 5, 2, 0, 0, 16, 7]  # unaligned src / dst starts
    keep, dsts, copies, expect = [], [], [], []
    for i, (n, off) in enumerate(zip(sizes, offsets)):
        src = torch.randint(1, 255, (n + off,), generator=gen, device="cuda:0", dtype=torch.uint8)
        dst = torch.zeros(n + 2 * off + 8, device="cuda:0", dtype=torch.uint8)  # 0: never a source byte
        if i % 4 == 3:  # host source (pageable)
            src = src.cpu()
        copies.append((dst.data_ptr() + off, src.data_ptr() + off, n, -1 if i % 4 == 3 else 0))
        keep.append(src)  # the copies hold raw addresses: the sources must outlive them
        dsts.append((dst, off, n))
        expect.append(src[off:off + n].to("cuda:0"))
    assert sum(c[3] == 0 for c in copies) > 8
    torch.cuda.synchronize()
    _C.stage_copies(0, copies)
    for (dst, off, n), want in zip(dsts, expect):
        assert torch.equal(dst[off:off + n], want)
        assert int(dst[:off].count_nonzero()) == 0 and int(dst[off + n:].count_nonzero()) == 0
    with pytest.raises(RuntimeError, match="null pointer"):
        _C.stage_copies(0, [(0, expect[0].data_ptr(), 1, 0)])

"""trt_fastops Conv / ConvTranspose through ONNX Runtime's CPU execution provider,
against the float64 numpy reference of models/reference.py (which resolves
auto_pad / output_shape independently of the C++ code).

A seeded random sweep covers 1-D/2-D/3-D, strides, dilations, asymmetric pads,
every auto_pad mode, groups (depthwise, channel multiplier), bias or not,
the fused activations, ConvTranspose with output_padding and output_shape, and
float32 / float16 / bfloat16 (bfloat16 graphs wrap the op between Cast nodes;
inputs are generated exactly representable in their dtype). Outputs are bound
to NaN-filled buffers so an element the op does not write shows up. Error
cases assert our messages.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime")

from models.reference import conv_reference, resolve_conv  # noqa: E402
from trt_fastops import DOMAIN  # noqa: E402
from trt_fastops.ort import make_session  # noqa: E402

IR_VERSION = 10
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
        "float64": TensorProto.DOUBLE, "int32": TensorProto.INT32}
NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int32": np.int32}
DTYPES = ["float32", "float16", "bfloat16"]
# The CPU op accumulates in float64 and rounds once: a rounding of the exact value
# (16-bit types: through float32, one more tiny rounding).
RTOL = {"float32": 1e-6, "float16": 1.2e-3, "bfloat16": 8e-3}
ACTIVATIONS = ["", "Relu", "Silu", "Gelu"]


# ---------------------------------------------------------------------------
# helpers


def round_bf16(a: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def rand(rng, shape, dtype, scale=1.0):
    """Random values (never zero) exactly representable in `dtype` (bfloat16: float32 holding bf16 values)."""
    a = np.asarray(rng.standard_normal(shape) * scale, dtype=np.float32)
    a[a == 0] = 0.5
    if dtype == "bfloat16":
        return round_bf16(a)
    if dtype == "int32":
        return rng.integers(1, 5, size=shape).astype(np.int32)
    return a.astype(NP[dtype])


def build_model(op, dtype, shapes, attrs=None, *, in_dtypes=None, const_weights=None, cast_out=True,
                node_name="conv", out_shape=None):
    """One trt_fastops conv node. shapes: slot (X, W, B) -> graph shape (None = unknown rank;
    str entries = symbolic dims). const_weights: slot -> array stored as an initializer instead
    of a graph input. bfloat16 inputs come in as float32 and go through Cast; Y too unless cast_out=False."""
    types = {k: dtype for k in shapes}
    types.update(in_dtypes or {})
    const_weights = const_weights or {}
    pre, post, graph_in, inits, node_in = [], [], [], [], []
    for slot in ("X", "W", "B"):
        if slot not in shapes:
            continue
        t = types[slot]
        src = slot + "_f32" if t == "bfloat16" else slot
        if slot in const_weights:
            arr = const_weights[slot]
            inits.append(numpy_helper.from_array(arr.astype(np.float32) if t == "bfloat16" else arr, name=src))
        else:
            graph_in.append(helper.make_tensor_value_info(src, TensorProto.FLOAT if t == "bfloat16" else ELEM[t],
                                                          shapes[slot]))
        if t == "bfloat16":
            pre.append(helper.make_node("Cast", [src], [slot], to=TensorProto.BFLOAT16))
        node_in.append(slot)
    node = helper.make_node(op, node_in, ["Y"], domain=DOMAIN, name=node_name, **dict(attrs or {}))
    if dtype == "bfloat16" and cast_out:
        post.append(helper.make_node("Cast", ["Y"], ["Y_f32"], to=TensorProto.FLOAT))
        graph_out = [helper.make_tensor_value_info("Y_f32", TensorProto.FLOAT, out_shape)]
    else:
        graph_out = [helper.make_tensor_value_info("Y", ELEM.get(dtype, TensorProto.FLOAT), out_shape)]
    graph = helper.make_graph(pre + [node] + post, f"{op}_{dtype}", graph_in, graph_out, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=IR_VERSION)


def feed_name(slot, dtype):
    return slot + "_f32" if dtype == "bfloat16" else slot


def run_poisoned(sess, feeds, out_name, shape, npdt):
    io = sess.io_binding()
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    buf = np.full(shape, np.nan, dtype=npdt)
    io.bind_ortvalue_output(out_name, ort.OrtValue.ortvalue_from_numpy(buf))
    sess.run_with_iobinding(io)
    assert np.array_equal(io.get_outputs()[0].numpy(), buf, equal_nan=True)  # ORT wrote into our buffer
    return buf


def check(op, dtype, feeds, attrs, *, graph_shapes=None, const_weights=(), tol_scale=1.0):
    """Run one config through our op and compare with the float64 reference."""
    attrs = dict(attrs)
    shapes = graph_shapes or {k: list(v.shape) for k, v in feeds.items()}
    consts = {k: feeds[k] for k in const_weights}
    model = build_model(op, dtype, shapes, attrs, const_weights=consts)
    sess = make_session(model)
    ref_attrs = {k: v for k, v in attrs.items() if k != "kernel_shape"}
    ref = conv_reference(feeds["X"], feeds["W"], feeds.get("B"), transpose=op == "ConvTranspose", **ref_attrs)
    run_feeds = {feed_name(k, dtype): v for k, v in feeds.items() if k not in consts}
    out_np = np.float32 if dtype == "bfloat16" else NP[dtype]
    got = run_poisoned(sess, run_feeds, "Y_f32" if dtype == "bfloat16" else "Y", ref.shape, out_np)
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), f"{op} {dtype}: unwritten (NaN) elements"
    rtol = RTOL[dtype] * tol_scale
    # atol: values that cancel to ~0 keep the rounding error of the (exact) float64 sum only
    atol = rtol * 1e-3 * max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=atol, err_msg=f"{op} {dtype} {attrs}")
    return sess


# ---------------------------------------------------------------------------
# the random sweep


def random_config(rng, op, spatial):
    """A valid random configuration: (shapes, attrs)."""
    transpose = op == "ConvTranspose"
    group = int(rng.choice([1, 1, 2, 3, 4]))
    kind = rng.choice(["plain", "depthwise", "multiplier"])
    if kind == "depthwise":
        c_in = group * 1 if group > 1 else 1
        c_out = c_in
    elif kind == "multiplier":
        c_in = group
        c_out = group * int(rng.integers(2, 4))
    else:
        c_in = group * int(rng.integers(1, 4))
        c_out = group * int(rng.integers(1, 4))
    n = int(rng.integers(1, 3))
    k = [int(rng.integers(1, 4)) for _ in range(spatial)]
    s = [int(rng.integers(1, 4)) for _ in range(spatial)]
    d = [int(rng.integers(1, 3)) for _ in range(spatial)]
    small = 5 if spatial == 3 else 9
    ins = [int(rng.integers(1, small)) for _ in range(spatial)]
    attrs = {"group": group}
    if rng.random() < 0.7:
        attrs["strides"] = s
    else:
        s = [1] * spatial
    if rng.random() < 0.6:
        attrs["dilations"] = d
    else:
        d = [1] * spatial
    dk = [d[i] * (k[i] - 1) + 1 for i in range(spatial)]
    mode = rng.choice(["pads", "pads", "none", "SAME_UPPER", "SAME_LOWER", "VALID"] +
                      (["output_shape", "output_shape"] if transpose else []))
    if mode == "pads":
        attrs["pads"] = [int(rng.integers(0, 3)) for _ in range(2 * spatial)]
    elif mode in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        attrs["auto_pad"] = str(mode)
    if not transpose:
        # the padded input must cover the dilated kernel
        p = attrs.get("pads", [0] * (2 * spatial))
        for i in range(spatial):
            if mode in ("pads", "none", "VALID"):
                need = dk[i] - (p[i] + p[i + spatial] if mode != "VALID" else 0)
                ins[i] = max(ins[i], need, 1)
    else:
        if rng.random() < 0.5:
            op_ = [int(rng.integers(0, s[i])) for i in range(spatial)]  # < stride: always consistent
            attrs["output_padding"] = op_
        else:
            op_ = [0] * spatial
        if mode == "output_shape":
            natural = [s[i] * (ins[i] - 1) + op_[i] + dk[i] for i in range(spatial)]
            # from well below the natural size up to stride - 1 more
            want = [max(1, natural[i] - op_[i] + int(rng.integers(-3, s[i]))) for i in range(spatial)]
            attrs["output_shape"] = want if rng.random() < 0.7 else [n, c_out] + want
            if rng.random() < 0.4:
                attrs["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
        else:
            # explicit pads may not eat the whole output
            if "pads" in attrs:
                for i in range(spatial):
                    natural = s[i] * (ins[i] - 1) + op_[i] + dk[i]
                    while attrs["pads"][i] + attrs["pads"][i + spatial] >= natural:
                        attrs["pads"][i + spatial] = max(0, attrs["pads"][i + spatial] - 1)
                        if attrs["pads"][i + spatial] == 0:
                            attrs["pads"][i] = max(0, attrs["pads"][i] - 1)
    if rng.random() < 0.3:
        attrs["kernel_shape"] = k
    if rng.random() < 0.5:
        attrs["activation"] = str(rng.choice(ACTIVATIONS[1:]))
    x = [n, c_in] + ins
    w = ([c_out, c_in // group] if not transpose else [c_in, c_out // group]) + k
    shapes = {"X": x, "W": w}
    if rng.random() < 0.6:
        shapes["B"] = [c_out]
    return shapes, attrs


def sweep(op, count, seed):
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        spatial = int(rng.choice([1, 2, 2, 3]))
        dtype = str(rng.choice(DTYPES))
        shapes, attrs = random_config(rng, op, spatial)
        try:  # keep only configs with a real output (the sweep is about numerics)
            _, _, out = resolve_conv(shapes["X"], shapes["W"], transpose=op == "ConvTranspose", **attrs)
        except Exception:
            continue
        if min(out) < 1:
            continue
        if op == "ConvTranspose":  # ONNX Runtime's adjoint rule (tested separately)
            sp = spatial
            s = attrs.get("strides", [1] * sp)
            d = attrs.get("dilations", [1] * sp)
            pb, pe, out = resolve_conv(shapes["X"], shapes["W"], transpose=True, **attrs)
            dk = [d[i] * (shapes["W"][2 + i] - 1) + 1 for i in range(sp)]
            if any((out[i] + pb[i] + pe[i] - dk[i]) // s[i] + 1 != shapes["X"][2 + i] for i in range(sp)):
                continue
        cases.append((f"{op}-{len(cases)}-{spatial}d-{dtype}", dtype, shapes, attrs, int(rng.integers(1 << 30))))
    return cases


SWEEP = sweep("Conv", 140, 1) + sweep("ConvTranspose", 110, 2)


@pytest.mark.parametrize("case", SWEEP, ids=[c[0] for c in SWEEP])
def test_random_sweep(case):
    name, dtype, shapes, attrs, seed = case
    op = name.split("-")[0]
    rng = np.random.default_rng(seed)
    feeds = {k: rand(rng, v, dtype, scale=1.0 if k == "X" else 0.5) for k, v in shapes.items()}
    # weights as initializers for a third of the cases (constant-weight path)
    consts = ("W", "B") if seed % 3 == 0 else ()
    check(op, dtype, feeds, attrs, const_weights=[c for c in consts if c in feeds])


def test_sweep_covers_the_space():
    """The sweep reaches every feature it claims to cover."""
    seen = set()
    for name, dtype, shapes, attrs, _ in SWEEP:
        op = name.split("-")[0]
        seen.add((op, len(shapes["X"]) - 2))
        seen.add(dtype)
        seen.add(attrs.get("auto_pad", "NOTSET"))
        seen.add("act:" + attrs.get("activation", ""))
        c_in, g = shapes["X"][1], attrs["group"]
        c_out = shapes["W"][0] if op == "Conv" else shapes["W"][1] * g
        if g > 1 and c_in == g and c_out == g:
            seen.add("depthwise")
        if g > 1 and c_in == g and c_out > g:
            seen.add("multiplier")
        if "B" in shapes:
            seen.add("bias")
        p = attrs.get("pads")
        if p and p[: len(p) // 2] != p[len(p) // 2:]:
            seen.add("asymmetric")
        if any(v > 1 for v in attrs.get("dilations", [])):
            seen.add(f"dilation-{len(shapes['X']) - 2}d")
        if "output_padding" in attrs and any(attrs["output_padding"]):
            seen.add("output_padding")
        if "output_shape" in attrs:
            seen.add("output_shape")
    want = {("Conv", 1), ("Conv", 2), ("Conv", 3), ("ConvTranspose", 1), ("ConvTranspose", 2), ("ConvTranspose", 3),
            *DTYPES, "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", *("act:" + a for a in ACTIVATIONS),
            "depthwise", "multiplier", "bias", "asymmetric", "dilation-3d", "output_padding", "output_shape"}
    assert want <= seen, sorted(map(str, want - seen))


# ---------------------------------------------------------------------------
# targeted cases


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_activation_on_wide_range(dtype, act):
    rng = np.random.default_rng(3)
    feeds = {"X": rand(rng, (2, 3, 6, 5), dtype, 3.0), "W": rand(rng, (4, 3, 3, 3), dtype, 0.5),
             "B": rand(rng, (4,), dtype)}
    check("Conv", dtype, feeds, {"pads": [1, 1, 1, 1], "activation": act})


@pytest.mark.parametrize("dtype", DTYPES)
def test_resnet_like_layers(dtype):
    rng = np.random.default_rng(4)
    for xs, ws, attrs in [((1, 3, 32, 32), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
                          ((2, 16, 14, 14), (16, 16, 3, 3), {"pads": [1, 1, 1, 1], "activation": "Relu"}),
                          ((2, 16, 14, 14), (32, 16, 1, 1), {"strides": [2, 2]}),
                          ((1, 32, 9, 9), (32, 1, 7, 7), {"pads": [3, 3, 3, 3], "group": 32}),
                          ((1, 24, 8, 8), (48, 4, 3, 3), {"pads": [1, 1, 1, 1], "group": 6, "activation": "Silu"})]:
        feeds = {"X": rand(rng, xs, dtype), "W": rand(rng, ws, dtype, 0.2), "B": rand(rng, (ws[0],), dtype)}
        check("Conv", dtype, feeds, attrs)


def test_onnx_runtime_agrees_on_resolution():
    """Our op and ONNX Runtime's own Conv/ConvTranspose give the same shapes and values for
    the padding rules where ONNX is vague (auto_pad, output_shape, output_padding)."""
    rng = np.random.default_rng(5)
    cases = [
        ("Conv", (1, 2, 7), (3, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2]}),
        ("Conv", (1, 2, 8), (3, 2, 4), {"auto_pad": "SAME_LOWER", "strides": [3]}),
        ("Conv", (1, 2, 6, 5), (3, 2, 2, 3), {"auto_pad": "VALID", "strides": [2, 1]}),
        ("Conv", (1, 2, 0), (3, 2, 3), {"pads": [2, 2]}),  # empty input, the pads cover the kernel
        ("ConvTranspose", (1, 1, 3, 3), (1, 2, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
        ("ConvTranspose", (1, 1, 3, 3), (1, 2, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
        ("ConvTranspose", (1, 1, 3, 3), (1, 2, 3, 3), {"output_shape": [6, 6], "strides": [2, 2]}),
        ("ConvTranspose", (1, 1, 3, 3), (1, 2, 3, 3), {"output_shape": [6, 6], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
        ("ConvTranspose", (1, 1, 3, 3), (1, 2, 3, 3), {"output_shape": [10, 8], "strides": [3, 2]}),
        ("ConvTranspose", (1, 1, 5), (1, 2, 3), {"output_shape": [17], "strides": [3]}),  # natural 15 + 2
        ("ConvTranspose", (1, 1, 4), (1, 2, 2), {"output_shape": [3], "strides": [2], "dilations": [2],
                                                 "output_padding": [1]}),
        ("ConvTranspose", (1, 2, 3, 4), (2, 3, 3, 2), {"strides": [3, 2], "output_padding": [2, 1],
                                                       "pads": [1, 0, 2, 1]}),
        ("ConvTranspose", (1, 1, 4), (1, 1, 1), {"auto_pad": "SAME_UPPER", "strides": [2]}),  # total clamps to 0
    ]
    for op, xs, ws, attrs in cases:
        x, w = rand(rng, xs, "float32"), rand(rng, ws, "float32")
        node = helper.make_node(op, ["X", "W"], ["Y"], **attrs)
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs),
                                            helper.make_tensor_value_info("W", TensorProto.FLOAT, ws)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
            None, {"X": x, "W": w})[0]
        got = make_session(build_model(op, "float32", {"X": list(xs), "W": list(ws)}, attrs)).run(
            None, {"X": x, "W": w})[0]
        assert got.shape == want.shape, (op, attrs, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{op} {attrs}")


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_empty_tensors(dtype):
    rng = np.random.default_rng(6)
    for op, xs, ws, bs in [("Conv", (0, 2, 5), (3, 2, 3), (3,)), ("Conv", (2, 2, 5), (0, 2, 3), (0,)),
                           ("ConvTranspose", (0, 2, 5), (2, 3, 3), (3,)), ("Conv", (1, 0, 4), (3, 0, 2), (3,))]:
        feeds = {"X": rand(rng, xs, dtype), "W": rand(rng, ws, dtype), "B": rand(rng, bs, dtype)}
        sess = make_session(build_model(op, dtype, {k: list(v.shape) for k, v in feeds.items()}, {}))
        got = sess.run(None, feeds)[0]
        ref = conv_reference(feeds["X"], feeds["W"], feeds["B"], transpose=op == "ConvTranspose")
        assert got.shape == ref.shape
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=RTOL[dtype])


def test_symbolic_and_unknown_dims():
    rng = np.random.default_rng(7)
    feeds = {"X": rand(rng, (2, 4, 9, 7), "float16"), "W": rand(rng, (6, 2, 3, 3), "float16"),
             "B": rand(rng, (6,), "float16")}
    attrs = {"group": 2, "strides": [2, 1], "pads": [1, 0, 0, 2]}
    sess = check("Conv", "float16", feeds, attrs, graph_shapes={"X": ["batch", 4, "h", "w"], "W": [6, 2, 3, 3],
                                                                 "B": [6]})
    y = sess.get_outputs()[0]
    assert y.type == "tensor(float16)" and y.shape[:2] == ["batch", 6], y.shape
    # fully static X: every output dim inferred
    sess = make_session(build_model("Conv", "float16", {k: list(v.shape) for k, v in feeds.items()}, attrs))
    assert sess.get_outputs()[0].shape == [2, 6, 4, 7]
    # ConvTranspose with output_shape: spatial dims known even when X's are not
    wt = rand(rng, (4, 3, 3, 3), "float32")
    model = build_model("ConvTranspose", "float32", {"X": ["n", 4, "h", "w"], "W": list(wt.shape)},
                        {"group": 2, "strides": [2, 2], "output_shape": [10, 9]})
    assert make_session(model).get_outputs()[0].shape[1:] == [6, 10, 9]
    # X with no shape at all (rank unknown until run time)
    check("Conv", "float16", feeds, attrs, graph_shapes={"X": None, "W": [6, 2, 3, 3], "B": [6]})
    check("Conv", "float16", feeds, attrs, graph_shapes={"X": None, "W": None, "B": None})


def test_unknown_output_dims_stay_unknown_downstream():
    """Spatial dims that depend on symbolic input dims are unknown, not -1 values that a
    following ONNX op would turn into negative sizes."""
    rng = np.random.default_rng(12)
    w = numpy_helper.from_array(rand(rng, (6, 4, 3, 3), "float32"), "W")
    w2 = numpy_helper.from_array(rand(rng, (5, 6, 3, 3), "float32"), "W2")
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], domain=DOMAIN, pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Conv", ["c", "W2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 4, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, w2])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=IR_VERSION)
    sess = make_session(model)
    shape = sess.get_outputs()[0].shape
    assert shape[:2] == ["N", 5] and not any(isinstance(d, int) and d < 0 for d in shape), shape
    x = rand(rng, (2, 4, 9, 11), "float32")
    assert sess.run(None, {"X": x})[0].shape == (2, 5, 3, 4)


# ConvTranspose `output_crop` (ours): added to the explicit pads. (x, w, attrs with output_crop,
# the ONNX attributes they equal)
OUTPUT_CROP = [
    ((2, 4, 5, 6), (4, 3, 3, 3), {"strides": [2, 2], "output_crop": [0, 1, 2, 0]},
     {"strides": [2, 2], "pads": [0, 1, 2, 0]}),
    ((1, 4, 5, 6), (4, 2, 3, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_crop": [0, 1, 1, 0],
                                  "output_padding": [1, 1], "dilations": [1, 2]},
     {"strides": [2, 2], "pads": [1, 2, 2, 1], "output_padding": [1, 1], "dilations": [1, 2]}),
    ((2, 6, 7), (6, 2, 5), {"strides": [3], "group": 3, "output_crop": [3, 0], "activation": "Silu"},
     {"strides": [3], "group": 3, "pads": [3, 0], "activation": "Silu"}),
    ((1, 2, 3, 4, 3), (2, 3, 3, 3, 2), {"strides": [2, 1, 2], "pads": [1, 0, 0, 1, 0, 0],
                                        "output_crop": [0, 1, 0, 1, 0, 1]},
     {"strides": [2, 1, 2], "pads": [1, 1, 0, 2, 0, 1]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", OUTPUT_CROP, ids=[f"{len(c[0]) - 2}d-{i}" for i, c in enumerate(OUTPUT_CROP)])
def test_output_crop_equals_asymmetric_pads(case, dtype):
    """pads + output_crop == the ONNX op with the summed pads (the reference computes the ONNX
    attributes; its own output_crop handling is checked against them too)."""
    xs, ws, ours, onnx_attrs = case
    rng = np.random.default_rng(len(xs) * 100 + sum(ws))
    feeds = {"X": rand(rng, xs, dtype), "W": rand(rng, ws, dtype, 0.5),
             "B": rand(rng, (ws[1] * ours.get("group", 1),), dtype)}
    sess = check("ConvTranspose", dtype, feeds, onnx_attrs)  # the ONNX form, for the expected output
    ref = conv_reference(feeds["X"], feeds["W"], feeds["B"], transpose=True, **onnx_attrs)
    np.testing.assert_array_equal(conv_reference(feeds["X"], feeds["W"], feeds["B"], transpose=True, **ours), ref)
    got = check("ConvTranspose", dtype, feeds, ours)
    assert got.get_outputs()[0].shape == sess.get_outputs()[0].shape  # shape inference sees the crop


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["Conv", "ConvTranspose"])
def test_output_dtypes(op, dtype):
    shapes = {"X": [1, 2, 5], "W": [2, 2, 3], "B": [2]}
    sess = make_session(build_model(op, dtype, shapes, {}, cast_out=False))
    elem = {"float32": "float", "float16": "float16", "bfloat16": "bfloat16"}[dtype]
    assert sess.get_outputs()[0].type == f"tensor({elem})"


def test_larger_problem_uses_the_thread_pool():
    """Enough planes for several parallel chunks; the split must not change the result."""
    rng = np.random.default_rng(8)
    feeds = {"X": rand(rng, (4, 16, 20, 20), "float32"), "W": rand(rng, (32, 16, 3, 3), "float32", 0.2),
             "B": rand(rng, (32,), "float32")}
    attrs = {"pads": [1, 1, 1, 1], "activation": "Relu"}
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    from trt_fastops.ort import session_options

    model = build_model("Conv", "float32", {k: list(v.shape) for k, v in feeds.items()}, attrs)
    sess = make_session(model, session_options=session_options(so))
    got = sess.run(None, feeds)[0]
    ref = conv_reference(feeds["X"], feeds["W"], feeds["B"], **attrs)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_concurrent_sessions():
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(9)
    feeds = {"X": rand(rng, (2, 4, 6, 6), "float32"), "W": rand(rng, (4, 2, 3, 3), "float32")}
    attrs = {"group": 2, "pads": [1, 1, 1, 1]}
    model = build_model("Conv", "float32", {k: list(v.shape) for k, v in feeds.items()}, attrs)
    ref = conv_reference(feeds["X"], feeds["W"], **attrs)

    def work(_):
        return make_session(model).run(None, feeds)[0]

    with ThreadPoolExecutor(8) as pool:
        for y in pool.map(work, range(16)):
            np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------
# errors: our message, naming op, input and expectation; the process survives


def session_error(model):
    with pytest.raises(Exception) as e:
        make_session(model)
    return str(e.value)


def assert_survives():
    rng = np.random.default_rng(10)
    feeds = {"X": rand(rng, (1, 2, 5), "float32"), "W": rand(rng, (3, 2, 3), "float32")}
    check("Conv", "float32", feeds, {})


CREATE_ERRORS = [
    # (id, op, dtype, graph shapes, attrs, input dtype overrides, expected fragments)
    ("group-channels", "Conv", "float32", {"X": [1, 6, 5, 5], "W": [4, 3, 3, 3]}, {"group": 4}, {},
     ["Conv: input 'X' (index 0) has 6 channels (dim 1 of shape [1, 6, 5, 5]), not divisible by group 4"]),
    ("w-dim1", "Conv", "float32", {"X": [1, 6, 5, 5], "W": [8, 2, 3, 3]}, {"group": 2}, {},
     ["Conv: input 'W' (index 1) has shape [8, 2, 3, 3]; dim 1 is 2, expected 3 (X's 6 channels / group 2)"]),
    ("w-out-group", "Conv", "float32", {"X": [1, 6, 5, 5], "W": [5, 3, 3, 3]}, {"group": 2}, {},
     ["Conv: input 'W' (index 1) has shape [5, 3, 3, 3]; its 5 output channels (dim 0) are not divisible by group 2"]),
    ("wt-dim0", "ConvTranspose", "float32", {"X": [1, 6, 5, 5], "W": [4, 3, 3, 3]}, {"group": 2}, {},
     ["ConvTranspose: input 'W' (index 1) has shape [4, 3, 3, 3]; dim 0 is 4, expected 6 (the channels of X)"]),
    ("kernel-shape", "Conv", "float32", {"X": [1, 2, 9, 9], "W": [4, 2, 5, 5]}, {"kernel_shape": [3, 3]}, {},
     ["Conv: attribute 'kernel_shape' is [3, 3], but input 'W' (index 1) has shape [4, 2, 5, 5] (kernel dims [5, 5])"]),
    ("kernel-shape-len", "Conv", "float32", {"X": [1, 2, 9, 9], "W": [4, 2, 5, 5]}, {"kernel_shape": [5]}, {},
     ["Conv: attribute 'kernel_shape' has 1 values [5], expected 2"]),
    ("bias-shape", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3], "B": [3]}, {}, {},
     ["Conv: input 'B' (index 2) has shape [3], expected [4] (the output channels: dim 0 of W)"]),
    ("bias-shape-t", "ConvTranspose", "float32", {"X": [1, 4, 9], "W": [4, 3, 3], "B": [3]}, {"group": 2}, {},
     ["ConvTranspose: input 'B' (index 2) has shape [3], expected [6] (the output channels: group * dim 1 of W)"]),
    ("bias-rank", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3], "B": [1, 4]}, {}, {},
     ["Conv: input 'B' (index 2) has shape [1, 4], expected a 1-D tensor [C_out]"]),
    ("x-rank", "Conv", "float32", {"X": [2, 9], "W": [4, 2, 3]}, {}, {},
     ["Conv: input 'X' (index 0) has shape [2, 9] (rank 2), expected rank 3, 4 or 5"]),
    ("x-rank-6", "Conv", "float32", {"X": [1, 2, 3, 3, 3, 3], "W": [4, 2, 1, 1, 1, 1]}, {}, {},
     ["(rank 6), expected rank 3, 4 or 5"]),
    ("w-rank", "Conv", "float32", {"X": [1, 2, 9, 9], "W": [4, 2, 3]}, {}, {},
     ["Conv: input 'W' (index 1) has shape [4, 2, 3] (rank 3), expected rank 4 like X (shape [1, 2, 9, 9])"]),
    ("no-output", "Conv", "float32", {"X": [1, 2, 3], "W": [4, 2, 3]}, {"dilations": [2]}, {},
     ["Conv: no output along spatial dim 0 (axis 2 of X): input size 3 + pads 0 + 0 = 3 is smaller than the "
      "dilated kernel 5 (kernel 3, dilation 2)"]),
    ("no-output-t", "ConvTranspose", "float32", {"X": [1, 2, 2], "W": [2, 2, 3]}, {"pads": [2, 2]}, {},
     ["ConvTranspose: no output along spatial dim 0 (axis 2 of X)", "= 0, expected >= 1"]),
    ("zero-kernel", "Conv", "float32", {"X": [1, 2, 4], "W": [4, 2, 0]}, {}, {},
     ["Conv: input 'W' (index 1) has shape [4, 2, 0]; kernel dims (2 on) must be >= 1"]),
    ("strides", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"strides": [0]}, {},
     ["Conv: attribute 'strides' is [0], expected values >= 1"]),
    ("dilations", "ConvTranspose", "float32", {"X": [1, 2, 9], "W": [2, 4, 3]}, {"dilations": [-1]}, {},
     ["ConvTranspose: attribute 'dilations' is [-1], expected values >= 1"]),
    ("pads-negative", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"pads": [-1, 0]}, {},
     ["Conv: attribute 'pads' is [-1, 0], expected values >= 0"]),
    ("pads-len", "Conv", "float32", {"X": [1, 2, 9, 9], "W": [4, 2, 3, 3]}, {"pads": [1, 1]}, {},
     ["Conv: attribute 'pads' has 2 values [1, 1], expected 4 (begin values, then end values, for X's 2 spatial dims)"]),
    ("strides-len", "Conv", "float32", {"X": [1, 2, 9, 9, 9], "W": [4, 2, 3, 3, 3]}, {"strides": [1, 1]}, {},
     ["Conv: attribute 'strides' has 2 values [1, 1], expected 3 (one value for X's 3 spatial dims)"]),
    ("pads-and-auto-pad", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"pads": [0, 0], "auto_pad": "VALID"}, {},
     ["Conv: attributes 'pads' ([0, 0]) and 'auto_pad' (VALID) cannot be used together"]),
    ("auto-pad-value", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"auto_pad": "SAME"}, {},
     ["Conv: attribute 'auto_pad' is 'SAME', expected NOTSET, SAME_UPPER, SAME_LOWER or VALID"]),
    ("group-zero", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"group": 0}, {},
     ["Conv: attribute 'group' is 0, expected >= 1"]),
    ("group-kind", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"group": [1]}, {},
     ["Conv: attribute 'group' is a list of ints, expected an int"]),
    ("strides-kind", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"strides": "1"}, {},
     ["Conv: attribute 'strides' is a string, expected a list of ints"]),
    ("activation-value", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"activation": "relu"}, {},
     ["Conv: attribute 'activation' is 'relu', expected '' (none), 'Relu', 'Silu' or 'Gelu'"]),
    ("activation-kind", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"activation": 1}, {},
     ["Conv: attribute 'activation' is an int, expected a string"]),
    ("output-padding-range", "ConvTranspose", "float32", {"X": [1, 2, 9], "W": [2, 4, 3]},
     {"strides": [2], "output_padding": [2]}, {},
     ["ConvTranspose: attribute 'output_padding' is [2], expected each value < max(stride, dilation); along "
      "spatial dim 0 (axis 2 of X) it is 2 with stride 2 and dilation 1"]),
    ("output-padding-adjoint", "ConvTranspose", "float32", {"X": [1, 1, 3], "W": [1, 2, 3]},
     {"dilations": [2], "output_padding": [1]}, {},
     ["ConvTranspose: output size 8 along spatial dim 0 (axis 2 of X) is inconsistent with input size 3",
      "output_padding 1 must be smaller than the stride"]),
    ("output-shape-too-large", "ConvTranspose", "float32", {"X": [1, 1, 3, 3], "W": [1, 2, 3, 3]},
     {"strides": [2, 2], "output_shape": [9, 9]}, {},
     ["ConvTranspose: attribute 'output_shape' is [9, 9], but along spatial dim 0 (axis 2 of X) at most 8 fits "
      "input size 3 (stride 2, dilated kernel 3); got 9"]),
    ("output-shape-len", "ConvTranspose", "float32", {"X": [1, 1, 3, 3], "W": [1, 2, 3, 3]},
     {"output_shape": [9, 9, 9]}, {},
     ["ConvTranspose: attribute 'output_shape' has 3 values [9, 9, 9], expected 2 (the spatial dims) or 4"]),
    ("output-padding-on-conv", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"output_padding": [1]}, {},
     []),  # not a Conv attribute: ignored, like any unknown attribute (ORT cannot list them)
    ("output-crop-negative", "ConvTranspose", "float32", {"X": [1, 2, 9], "W": [2, 4, 3]},
     {"output_crop": [0, -1]}, {}, ["ConvTranspose: attribute 'output_crop' is [0, -1], expected values >= 0"]),
    ("output-crop-len", "ConvTranspose", "float32", {"X": [1, 2, 9, 9], "W": [2, 4, 3, 3]},
     {"output_crop": [1, 0]}, {},
     ["ConvTranspose: attribute 'output_crop' has 2 values [1, 0], expected 4 (begin values, then end values, "
      "for X's 2 spatial dims)"]),
    ("output-crop-auto-pad", "ConvTranspose", "float32", {"X": [1, 2, 9], "W": [2, 4, 3]},
     {"output_crop": [0, 1], "auto_pad": "SAME_UPPER"}, {},
     ["ConvTranspose: attribute 'output_crop' ([0, 1]) adds to explicit pads; it cannot be used with "
      "auto_pad=SAME_UPPER"]),
    ("output-crop-output-shape", "ConvTranspose", "float32", {"X": [1, 2, 9], "W": [2, 4, 3]},
     {"output_crop": [0, 1], "output_shape": [10]}, {},
     ["ConvTranspose: attributes 'output_crop' ([0, 1]) and 'output_shape' ([10]) cannot be used together"]),
    ("output-crop-no-output", "ConvTranspose", "float32", {"X": [1, 2, 2], "W": [2, 2, 3]},
     {"pads": [1, 1], "output_crop": [1, 1]}, {},
     ["ConvTranspose: no output along spatial dim 0 (axis 2 of X)", "(pads + output_crop) = 0, expected >= 1"]),
    ("output-crop-on-conv", "Conv", "float32", {"X": [1, 2, 9], "W": [4, 2, 3]}, {"output_crop": [1, 0]}, {},
     []),  # not a Conv attribute: ignored, like any unknown attribute (ORT cannot list them)
    ("transpose-empty-spatial", "ConvTranspose", "float32", {"X": [1, 2, 0], "W": [2, 4, 3]}, {}, {},
     ["ConvTranspose: input 'X' (index 0) has size 0 along spatial dim 0 (axis 2 of X), expected >= 1"]),
    ("dtype-w", "Conv", "float16", {"X": [1, 2, 9], "W": [4, 2, 3]}, {}, {"W": "float32"},
     ["Conv: input 'W' (index 1) is float32, expected float16 (the dtype of X)"]),
    ("dtype-b", "ConvTranspose", "bfloat16", {"X": [1, 2, 9], "W": [2, 4, 3], "B": [4]}, {}, {"B": "float16"},
     ["ConvTranspose: input 'B' (index 2) is float16, expected bfloat16 (the dtype of X)"]),
    ("x-float64", "Conv", "float64", {"X": [1, 2, 9], "W": [4, 2, 3]}, {}, {},
     ["Conv: input 'X' (index 0) is float64, expected float32, float16 or bfloat16"]),
    ("x-int32", "ConvTranspose", "int32", {"X": [1, 2, 9], "W": [2, 4, 3]}, {}, {},
     ["ConvTranspose: input 'X' (index 0) is int32, expected float32, float16 or bfloat16"]),
]


@pytest.mark.parametrize("case", CREATE_ERRORS, ids=[c[0] for c in CREATE_ERRORS])
def test_errors_at_session_creation(case):
    _, op, dtype, shapes, attrs, overrides, fragments = case
    model = build_model(op, dtype, shapes, attrs, in_dtypes=overrides)
    if not fragments:
        make_session(model)  # accepted
        return
    msg = session_error(model)
    for f in fragments:
        assert f in msg, f"expected {f!r} in {msg!r}"
    assert "(node 'conv')" in msg
    assert_survives()


def run_error(op, dtype, graph_shapes, feeds, attrs=None):
    sess = make_session(build_model(op, dtype, graph_shapes, attrs or {}))
    with pytest.raises(Exception) as e:
        sess.run(None, {feed_name(k, dtype): v for k, v in feeds.items()})
    return str(e.value)


def test_errors_at_run_time_with_dynamic_shapes():
    rng = np.random.default_rng(11)
    # channels vs group only visible at run time
    msg = run_error("Conv", "float32", {"X": ["n", "c", "h"], "W": ["m", "k", 3]},
                    {"X": rand(rng, (1, 6, 9), "float32"), "W": rand(rng, (4, 2, 3), "float32")}, {"group": 2})
    assert "Conv: input 'W' (index 1) has shape [4, 2, 3]; dim 1 is 2, expected 3 (X's 6 channels / group 2)" in msg
    assert "(node 'conv')" in msg
    # input smaller than the kernel
    msg = run_error("Conv", "float16", {"X": ["n", 2, "h"], "W": [4, 2, 5]},
                    {"X": rand(rng, (1, 2, 3), "float16"), "W": rand(rng, (4, 2, 5), "float16")})
    assert "Conv: no output along spatial dim 0 (axis 2 of X): input size 3 + pads 0 + 0 = 3" in msg
    # X of unknown rank fed with the wrong rank
    msg = run_error("Conv", "float32", {"X": None, "W": [4, 2, 3]},
                    {"X": rand(rng, (2, 9), "float32"), "W": rand(rng, (4, 2, 3), "float32")})
    assert "Conv: input 'X' (index 0) has shape [2, 9] (rank 2), expected rank 3, 4 or 5" in msg
    # ConvTranspose output_shape larger than the input allows, at run time
    msg = run_error("ConvTranspose", "float32", {"X": ["n", 1, "h"], "W": [1, 2, 3]},
                    {"X": rand(rng, (1, 1, 2), "float32"), "W": rand(rng, (1, 2, 3), "float32")},
                    {"strides": [2], "output_shape": [9]})
    assert "ConvTranspose: attribute 'output_shape' is [9], but along spatial dim 0 (axis 2 of X) at most 6 fits" in msg
    # bias length only known at run time
    msg = run_error("Conv", "float32", {"X": [1, 2, 9], "W": ["m", 2, 3], "B": ["b"]},
                    {"X": rand(rng, (1, 2, 9), "float32"), "W": rand(rng, (4, 2, 3), "float32"),
                     "B": rand(rng, (5,), "float32")})
    assert "Conv: input 'B' (index 2) has shape [5], expected [4] (the output channels: dim 0 of W)" in msg
    assert_survives()


def test_cuda_registration_without_cuda_ep():
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA EP")
    model = build_model("Conv", "float32", {"X": [1, 2, 5], "W": [3, 2, 3]}, {})
    with pytest.raises(RuntimeError, match="CUDAExecutionProvider.*not available"):
        make_session(model, ("CUDAExecutionProvider",))


def test_model_checker_accepts_the_op():
    model = build_model("ConvTranspose", "float16", {"X": [1, 2, 5], "W": [2, 3, 3], "B": [3]},
                        {"strides": [2], "output_padding": [1], "activation": "Gelu"}, out_shape=[1, 3, 12])
    onnx.checker.check_model(model, full_check=True)

"""Helpers shared by the ONNX Runtime execution-provider tests of every op family
(tests/gpu/test_*_ort_cuda.py): which EP is under test, sessions that may not fall
back to the CPU EP, and runs with outputs bound to NaN-filled device buffers.

TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider runs those tests on the CPU EP as a
stand-in (no GPU needed) to check the test code itself.
"""
from __future__ import annotations

import os
import threading

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from trt_fastops.ort import make_session

EP = os.environ.get("TRT_FASTOPS_ORT_TEST_EP", "CUDAExecutionProvider")
ON_CUDA = EP == "CUDAExecutionProvider"
DEVICE = "cuda" if ON_CUDA else "cpu"


def session(ort, model, *, cuda_graph=False):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if ON_CUDA:
        # No silent CPU fallback: session creation fails if a node would leave the CUDA EP.
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = make_session(model, (EP,), cuda_graph=cuda_graph and ON_CUDA, session_options=so)
    assert sess.get_providers()[0] == EP, sess.get_providers()
    return sess


def device_value(ort, arr, keep):
    """OrtValue on DEVICE holding a copy of `arr`. Host OrtValues borrow the
    numpy memory, so the array is kept referenced in `keep`."""
    arr = np.ascontiguousarray(arr)
    keep.append(arr)
    return ort.OrtValue.ortvalue_from_numpy(arr, DEVICE, 0)


def run_device(ort, sess, feeds, specs):
    """Run with host inputs and outputs bound to NaN-filled device buffers
    (zero-element outputs are left to ORT). Returns graph output name -> array."""
    io = sess.io_binding()
    keep = []
    for name, arr in feeds.items():
        io.bind_cpu_input(name, np.ascontiguousarray(arr))
    names = []
    for name, (shape, npdt) in specs.items():
        if int(np.prod(shape)) > 0:
            io.bind_ortvalue_output(name, device_value(ort, np.full(shape, np.nan, dtype=npdt), keep))
        else:
            io.bind_output(name, "cpu")
        names.append(name)
    sess.run_with_iobinding(io)
    io.synchronize_outputs()
    # Copy now: on the host, numpy() views memory that `keep` owns.
    return {n: np.array(v.numpy(), copy=True) for n, v in zip(names, io.get_outputs())}


# Typed device buffers (OrtValues on DEVICE) for the ops' tests, float32 / float16 / bfloat16:
# numpy has no bfloat16, so bfloat16 values travel as their bit patterns (uint16).
NP = {"float32": np.float32, "float16": np.float16}
ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}
BF16_NAN = 0x7FC0
IR_VERSION = 10  # what onnxruntime 1.31 reads


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 values that are exact bfloat16 -> their bfloat16 bit patterns."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    bits = a.view(np.uint32)
    assert not (bits & 0xFFFF).any(), "not exactly representable in bfloat16"
    return (bits >> 16).astype(np.uint16)


def tensor_proto(name, arr, dtype):
    if dtype == "bfloat16":
        return helper.make_tensor(name, TensorProto.BFLOAT16, arr.shape, bf16_bits(arr).tobytes(), raw=True)
    return numpy_helper.from_array(np.asarray(arr, NP[dtype]), name)


def new_value(ort, shape, dtype):
    return ort.OrtValue.ortvalue_from_shape_and_type(list(shape), ELEM[dtype] if dtype == "bfloat16" else NP[dtype],
                                                     DEVICE, 0)


def fill(v, arr, dtype):
    v.update_inplace(bf16_bits(arr) if dtype == "bfloat16" else np.ascontiguousarray(arr, NP[dtype]))


def device_tensor(ort, arr, dtype):
    """A DEVICE OrtValue owning a copy of `arr` in `dtype` (ORT's allocation: aligned)."""
    v = new_value(ort, arr.shape, dtype)
    if arr.size:
        fill(v, arr, dtype)
    return v


def poison(v, shape, dtype):
    if int(np.prod(shape)) == 0:
        return
    if dtype == "bfloat16":
        v.update_inplace(np.full(shape, BF16_NAN, np.uint16))
    else:
        v.update_inplace(np.full(shape, np.nan, NP[dtype]))


def poisoned(ort, shape, dtype):
    v = new_value(ort, shape, dtype)
    poison(v, shape, dtype)
    return v


_readback = {}
_readback_lock = threading.Lock()


def to_host(ort, v, dtype):
    """float64 host copy of a DEVICE OrtValue (bfloat16 through a Cast session: numpy has no bfloat16)."""
    if dtype != "bfloat16":
        return np.array(v.numpy(), dtype=np.float64, copy=True)
    with _readback_lock:
        if "sess" not in _readback:
            node = helper.make_node("Cast", ["Y"], ["F"], to=TensorProto.FLOAT)
            g = helper.make_graph([node], "readback", [helper.make_tensor_value_info("Y", TensorProto.BFLOAT16, None)],
                                  [helper.make_tensor_value_info("F", TensorProto.FLOAT, None)])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
            _readback["sess"] = ort.InferenceSession(m.SerializeToString(), providers=[EP])
        sess = _readback["sess"]
    io = sess.io_binding()
    io.bind_ortvalue_input("Y", v)
    io.bind_output("F", "cpu")
    sess.run_with_iobinding(io)
    return np.array(io.get_outputs()[0].numpy(), dtype=np.float64, copy=True)

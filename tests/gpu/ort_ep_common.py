"""Helpers shared by the ONNX Runtime execution-provider tests of every op family
(tests/gpu/test_*_ort_cuda.py): which EP is under test, sessions that may not fall
back to the CPU EP, and runs with outputs bound to NaN-filled device buffers.

TRT_FASTOPS_ORT_TEST_EP=CPUExecutionProvider runs those tests on the CPU EP as a
stand-in (no GPU needed) to check the test code itself.
"""
from __future__ import annotations

import os

import numpy as np

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

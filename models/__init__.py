"""Builders for the small ONNX models used by the demo, the tests and the benchmarks.

Each builder returns an onnx.ModelProto written in the op patterns real exporters
produce, with random weights; no network is needed.
"""

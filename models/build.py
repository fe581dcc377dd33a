"""Build the named demo/test models.

    python -m models.build list
    python -m models.build bert_tiny -o /tmp/bert_tiny.onnx [--dtype float16] [--seed 1]
    python -m models.build llama_tiny -o /tmp/llama.onnx --external-data

From Python: `models.build.build("bert_tiny", dtype="float16")` -> onnx.ModelProto,
`models.build.example_inputs(model)` -> seeded feeds for every graph input.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

from . import convnets as C
from . import transformer as T


@dataclasses.dataclass(frozen=True)
class Entry:
    builder: Callable[..., onnx.ModelProto]
    description: str
    #: op types the full rewrite (all ops) is expected to leave, as {op_type: count},
    #: for the tiny config; None for configs not used in CI.
    expected: dict | None = None


def _entry(fn, description, expected=None, **kw) -> Entry:
    return Entry(functools.partial(fn, **kw), description, expected)


_TINY_LAYERS = T.CONFIGS["tiny"].layers
# bert: embeddings LN (skip: X = word + type, Skip = position) + 2 per layer, all SkipLayerNorm.
# Attention: one per layer; nothing of the decomposed attention (Softmax) is left.
_ATTN = {"Attention": _TINY_LAYERS, "Softmax": 0}
_BERT = {"SkipLayerNorm": 1 + 2 * _TINY_LAYERS, "LayerNorm": 0, "LayerNormalization": 0, **_ATTN}
# gpt: ln_1 of block 0 sees the embedding Add, every other LN a residual Add.
_GPT = {"SkipLayerNorm": 2 * _TINY_LAYERS + 1, "LayerNorm": 0, "LayerNormalization": 0, **_ATTN}
# llama: the first input_layernorm has no Add in front (plain RMSNorm), the rest fuse the residual.
_LLAMA = {"RMSNorm": 2 * _TINY_LAYERS + 1, "RMSNormalization": 0, **_ATTN}
# vit: pre-LN blocks; ln_1 of block 0 fuses the position-embedding Add, as in gpt.
_VIT = {"SkipLayerNorm": 2 * _TINY_LAYERS + 1, "LayerNorm": 0, "LayerNormalization": 0, **_ATTN}

MODELS: dict[str, Entry] = {
    "bert_tiny": _entry(T.bert, "BERT encoder (tiny), ONNX LayerNormalization (opset 17), residual Adds",
                        _BERT, config="tiny", ln="op"),
    "bert_tiny_decomposed": _entry(
        T.bert, "BERT (tiny), decomposed layer norm ReduceMean/Sub/Pow/Sqrt/Div (opset 13, axes attribute)",
        _BERT, config="tiny", ln="decomposed"),
    "bert_tiny_decomposed_opset18": _entry(
        T.bert, "BERT (tiny), decomposed layer norm with ReduceMean axes as an input (opset 18)",
        _BERT, config="tiny", ln="decomposed", opset=18),
    "bert_tiny_decomposed_recip": _entry(
        T.bert, "BERT (tiny), decomposed layer norm Mul(d,d) / Reciprocal*Mul, commuted scale and bias (opset 13)",
        _BERT, config="tiny", ln="decomposed_recip"),
    "bert_tiny_decomposed_cast": _entry(
        T.bert, "BERT (tiny), decomposed layer norm inside Cast to float32 and back (torch x.float()) (opset 13)",
        _BERT, config="tiny", ln="decomposed_cast"),
    "bert_tiny_dynamic": _entry(
        T.bert, "BERT (tiny), LayerNormalization, dynamic batch/sequence axes (Reshape with 0 dims, sliced positions)",
        _BERT, config="tiny", ln="op", dynamic=True),
    "bert_tiny_mask2": _entry(
        T.bert, "BERT (tiny), padding mask via two Unsqueezes as torch.onnx.export (TorchScript) writes "
                "mask[:, None, None, :]", _BERT, config="tiny", ln="op", mask_unsqueezes=2),
    "bert_base": _entry(T.bert, "BERT-base sized encoder (12 layers, hidden 768, seq 128), LayerNormalization",
                        None, config="base", ln="op"),
    "gpt_tiny": _entry(T.gpt, "GPT-2-style pre-LN decoder (tiny), causal mask, LayerNormalization (opset 17)",
                       _GPT, config="tiny", ln="op"),
    "gpt_tiny_decomposed": _entry(T.gpt, "GPT-2-style pre-LN decoder (tiny), decomposed layer norm (opset 13)",
                                  _GPT, config="tiny", ln="decomposed"),
    "llama_tiny": _entry(T.llama, "Llama-style decoder (tiny), Hugging Face RMSNorm with Cast (opset 18)",
                         _LLAMA, config="tiny", rms="hf"),
    "llama_tiny_rmsop": _entry(T.llama, "Llama-style decoder (tiny), ONNX RMSNormalization (opset 23)",
                               _LLAMA, config="tiny", rms="op"),
    "llama_tiny_reciprocal": _entry(
        T.llama, "Llama-style decoder (tiny), RMSNorm as Mul(x,x)/Reciprocal*Mul (opset 18)",
        _LLAMA, config="tiny", rms="reciprocal"),
    "llama_tiny_gqa": _entry(
        T.llama, "Llama-style decoder (tiny), GQA (2 kv heads, HF repeat_kv), rotary embeddings, float32 "
                  "softmax with Casts, causal mask of finfo.min (opset 18)",
        {**_LLAMA, "Expand": 0}, config="tiny", rms="hf", kv_heads=2, rope=True),
    "llama_tiny_gqa_norope": _entry(
        T.llama, "Llama-style decoder (tiny), GQA with repeat_kv, no rotary (the 3-D Attention form)",
        {**_LLAMA, "Expand": 0, "Transpose": 0}, config="tiny", rms="hf", kv_heads=2),
    "llama_tiny_attention_op": _entry(
        T.llama, "Llama-style decoder (tiny) with the ONNX Attention op (is_causal, GQA 3-D) and "
                  "RMSNormalization (opset 23)", {**_LLAMA, "Attention": _TINY_LAYERS}, config="tiny", rms="op",
        kv_heads=2, attention="op"),
    "vit_tiny": _entry(T.vit, "ViT-style encoder (tiny): patch Conv, pre-LN blocks, timm fused QKV "
                              "(Reshape/Transpose/Gather), q * scale, GELU (opset 17)", _VIT, config="tiny"),
    "llama_tiny_div": _entry(T.llama, "Llama-style decoder (tiny), RMSNorm as Pow/Div(x, Sqrt) (opset 13)",
                             _LLAMA, config="tiny", rms="div", opset=13),
}

#: models small enough for CI.
TINY_MODELS = tuple(n for n, e in MODELS.items() if e.expected is not None)

#: realistic sizes for the end-to-end benchmark (scripts/bench_models.py); not built in CI at
#: these sizes (tests build them with smaller batch / seq / layers keywords).
BASE_MODELS_ = {
    "bert_base_dynamic": _entry(
        T.bert, "BERT-base (110M): dynamic batch / sequence axes, torch-style padding mask (two Unsqueezes), "
                "LayerNormalization (opset 17)", config="base", ln="op", dynamic=True, mask_unsqueezes=2),
    "gpt2_small": _entry(T.gpt, "GPT-2 small (124M) pre-LN decoder, causal, 1024 tokens, LayerNormalization",
                         config="gpt2", ln="op"),
    "llama_small_gqa": _entry(
        T.llama, "Llama-style stack of 4 TinyLlama-1.1B blocks (hidden 2048, 32 heads, 4 KV heads, HF RMSNorm, "
                 "rotary, SwiGLU 5632), 1024 tokens", config="llama_small", rms="hf", kv_heads=4, rope=True),
    "vit_base": _entry(T.vit, "ViT-B/16 encoder at 224x224 (196 patches, 12 layers, hidden 768), batch 32",
                       config="vit_base", patch=16, grid=(14, 14)),
    "resnet50": _entry(C.resnet_bottleneck, "ResNet-50 (bottlenecks 3-4-6-3, width 64) at 224x224, batch 32",
                       blocks=(3, 4, 6, 3), width=64, size=224, classes=1000, batch=32),
}
MODELS.update(BASE_MODELS_)
BASE_MODELS = tuple(BASE_MODELS_)

#: convolutional networks (tiny, CI-sized); see models/convnets.py. Their convs are
#: rewritten only with rewrite(conv="all" | "fallback").
CONV_MODELS_ = {
    "resnet_tiny": _entry(C.resnet, "ResNet-style CNN: 7x7/2 stem, basic blocks, 1x1/2 downsample, Relu"),
    "regnet_tiny": _entry(C.regnet, "RegNet-style CNN: grouped 3x3 bottlenecks (group widths 8 and 4)"),
    "mobilenet_tiny": _entry(C.mobilenet, "MobileNetV2-style CNN: 1x1 expand, ReLU6 (Clip), depthwise 3x3"),
    "efficientnet_tiny": _entry(C.efficientnet, "EfficientNet-style, TF export: auto_pad SAME_UPPER, SiLU, "
                                                "depthwise with channel multiplier"),
    "convnext_tiny": _entry(C.convnext, "ConvNeXt-style CNN: depthwise 7x7, GELU erf form (opset 17)"),
    "convnext_tiny_opset20": _entry(C.convnext, "ConvNeXt-style CNN with the Gelu op (opset 20)", opset=20),
    "conv1d_tiny": _entry(C.conv1d, "1-D CNN: strided feature extractor + GELU, causal dilated stack"),
    "conv3d_tiny": _entry(C.conv3d, "3-D CNN: dilated and grouped 3-D convs, ConvTranspose 3-D upsampling"),
    "unet_tiny": _entry(C.unet, "U-Net-style 2-D encoder/decoder with ConvTranspose (grouped, output_padding)"),
}
MODELS.update(CONV_MODELS_)
CONV_MODELS = tuple(CONV_MODELS_)


def names() -> list[str]:
    return list(MODELS)


def build(name: str, *, dtype: str = "float32", seed: int = 0, **kw) -> onnx.ModelProto:
    """Build model `name` (see names()); extra keywords go to the builder (batch, seq, layers, ...)."""
    if name not in MODELS:
        raise KeyError(f"unknown model {name!r}; available: {', '.join(MODELS)}")
    return MODELS[name].builder(dtype=dtype, seed=seed, **kw)


def expected_ops(name: str) -> dict | None:
    """Op counts the full rewrite must produce for the tiny models (None where not specified)."""
    return MODELS[name].expected


def example_inputs(model: onnx.ModelProto, seed: int = 0, dims: dict[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded feeds: token ids within the vocabulary, a padding mask, normal floats otherwise.

    dims: sizes of symbolic axes ({"batch": 8, "sequence": 128}); by default those the builder
    recorded in the model's metadata (dim.<name>), else 1.
    """
    rng = np.random.default_rng(seed)
    props = {p.key: p.value for p in model.metadata_props}
    props.update({f"dim.{k}": str(v) for k, v in (dims or {}).items()})
    vocab = int(props.get("vocab_size", 2))
    type_vocab = int(props.get("type_vocab_size", 2))
    init = {i.name for i in model.graph.initializer}
    feeds: dict[str, np.ndarray] = {}
    for inp in model.graph.input:
        if inp.name in init:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else int(props.get(f"dim.{d.dim_param}", 1))
                 for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if inp.name == "input_ids":
            arr = rng.integers(0, vocab, shape)
        elif inp.name == "token_type_ids":
            arr = rng.integers(0, type_vocab, shape)
        elif inp.name == "attention_mask":
            arr = np.ones(shape)
            if len(shape) == 2 and shape[0] > 1 and shape[1] > 2:
                arr[-1, shape[1] // 2:] = 0  # pad the second half of the last sequence
        elif np.issubdtype(dtype, np.floating):
            arr = rng.standard_normal(shape)
        elif dtype == np.bool_:
            arr = rng.integers(0, 2, shape)
        else:
            arr = rng.integers(0, 2, shape)
        feeds[inp.name] = np.asarray(arr).astype(dtype)
    return feeds


def save(model: onnx.ModelProto, path: str | Path, *, external_data: bool = False) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if external_data:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)  # onnx.save_model rewrites the tensors it externalises in place
        onnx.save_model(copy, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.build", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="model name, or 'list'")
    p.add_argument("-o", "--output", help="where to write the .onnx file")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--external-data", action="store_true",
                   help="store the weights in OUTPUT.data next to the model")
    args = p.parse_args(argv)
    if args.name == "list":
        width = max(map(len, MODELS))
        for n, e in MODELS.items():
            print(f"{n:{width}s}  {e.description}")
        return 0
    if args.name not in MODELS:
        print(f"unknown model {args.name!r}; run `python -m models.build list`", file=sys.stderr)
        return 2
    if not args.output:
        print("missing -o/--output", file=sys.stderr)
        return 2
    model = build(args.name, dtype=args.dtype, seed=args.seed)
    save(model, args.output, external_data=args.external_data)
    print(f"wrote {args.output} ({args.name}, {args.dtype}, opset "
          f"{model.opset_import[0].version}, IR {model.ir_version}, {len(model.graph.node)} nodes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Transformer models in the op patterns real exporters produce.

* bert(...)  BERT-style post-LN encoder: embeddings (word + token type + position)
  -> LayerNorm, then per layer self-attention (MatMul + Add bias, Reshape/Transpose
  head split, MatMul Q.K^T, Div by sqrt(d), Add padding mask, Softmax, MatMul V,
  merge heads), out-proj + bias + residual Add -> LayerNorm, FFN with Gelu (Erf
  form) + residual Add -> LayerNorm. The layer norm comes as the ONNX
  LayerNormalization op (opset 17) or in the decomposed forms older exporters emit.
* gpt(...)   GPT-2-style pre-LN decoder (causal mask via Where, fused QKV + Split,
  tanh Gelu with Pow(x, 3)), final ln_f.
* llama(...) Llama-style decoder with RMSNorm (decomposed Hugging Face form with
  Cast to float32 and back, or the ONNX RMSNormalization op of opset 23), SwiGLU MLP,
  residual Adds.

All weights are seeded random; shapes are static. Linear layers are MatMul with the
weight stored [in, out] followed by Add(bias, MatMul) as torch.onnx.export writes them.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import onnx
from onnx import TensorProto

from ._graph import GraphBuilder


@dataclasses.dataclass(frozen=True)
class Config:
    hidden: int
    heads: int
    layers: int
    intermediate: int
    vocab: int = 128
    type_vocab: int = 2
    max_positions: int = 512
    batch: int = 2
    seq: int = 8
    eps: float = 1e-12
    #: dynamic batch/sequence axes (dim_params "batch", "sequence"); reshapes copy dims with 0
    dynamic: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


CONFIGS = {
    "tiny": Config(hidden=64, heads=4, layers=2, intermediate=256, vocab=128, batch=2, seq=8),
    # bert-base sized; available for benchmarks, not used in CI.
    "base": Config(hidden=768, heads=12, layers=12, intermediate=3072, vocab=30522, batch=1, seq=128),
    # GPT-2 small (124M): 1024 positions, a 1k-token prefill by default.
    "gpt2": Config(hidden=768, heads=12, layers=12, intermediate=3072, vocab=50257, max_positions=1024,
                   batch=1, seq=1024),
    # TinyLlama-1.1B's block (hidden 2048, 32 heads of 64, 4 KV heads, MLP 5632), 4 of its 22 layers.
    # llama() halves `intermediate` for the SwiGLU width, hence 2 * 5632.
    "llama_small": Config(hidden=2048, heads=32, layers=4, intermediate=2 * 5632, vocab=32000,
                          max_positions=2048, batch=1, seq=1024),
    # ViT-B/16 at 224x224: 196 patches (vit() with patch=16, grid=(14, 14)), no class token.
    "vit_base": Config(hidden=768, heads=12, layers=12, intermediate=3072, batch=32, seq=196),
}

LN_FORMS = ("op", "decomposed", "decomposed_recip", "decomposed_cast")
RMS_FORMS = ("op", "hf", "reciprocal", "div")


def _config(config: str | Config, **overrides) -> Config:
    cfg = CONFIGS[config] if isinstance(config, str) else config
    overrides = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(cfg, **overrides) if overrides else cfg


# ---------------------------------------------------------------------------
# building blocks
# ---------------------------------------------------------------------------
def linear(g: GraphBuilder, x: str, n_in: int, n_out: int, name: str, *, bias: bool = True) -> str:
    w = g.weight(f"{name}.weight", (n_in, n_out), std=1.0 / math.sqrt(n_in))
    with g.scope(name.rsplit(".", 1)[-1]):
        y = g.node("MatMul", [x, w])
        if bias:
            b = g.weight(f"{name}.bias", (n_out,), std=0.1)
            y = g.node("Add", [b, y])
    return y


def _reduce_mean(g: GraphBuilder, x: str, opset: int, axes=(-1,)) -> str:
    # opset < 18: axes is an attribute; from 18 on it is an input.
    if opset < 18:
        return g.node("ReduceMean", [x], axes=list(axes), keepdims=1)
    return g.node("ReduceMean", [x, g.ints(axes)], keepdims=1)


def layer_norm(g: GraphBuilder, x: str, hidden: int, name: str, *, form: str, opset: int,
               eps: float) -> str:
    """nn.LayerNorm(hidden) over the last axis, written as `form` (see LN_FORMS)."""
    if form not in LN_FORMS:
        raise ValueError(f"unknown layer-norm form {form!r}; expected one of {LN_FORMS}")
    w = g.weight(f"{name}.weight", (hidden,), std=0.1, mean=1.0)
    b = g.weight(f"{name}.bias", (hidden,), std=0.1)
    with g.scope(name.rsplit(".", 1)[-1]):
        if form == "op":
            if opset < 17:
                raise ValueError("LayerNormalization needs opset >= 17")
            return g.node("LayerNormalization", [x, w, b], axis=-1, epsilon=eps)
        if form == "decomposed_cast":
            # torch: x.float() -> layer norm in float32 -> .to(dtype) -> * weight + bias
            src = g.node("Cast", [x], to=TensorProto.FLOAT)
            f32 = np.float32
        else:
            src, f32 = x, None
        mean = _reduce_mean(g, src, opset)
        d = g.node("Sub", [src, mean])
        if form == "decomposed_recip":
            sq = g.node("Mul", [d, d])
        else:
            sq = g.node("Pow", [d, g.const(2.0, f32)])
        var = _reduce_mean(g, sq, opset)
        std = g.node("Sqrt", [g.node("Add", [var, g.const(eps, f32)])])
        if form == "decomposed_recip":
            n = g.node("Mul", [d, g.node("Reciprocal", [std])])
            return g.node("Add", [b, g.node("Mul", [w, n])])  # commuted scale and bias
        n = g.node("Div", [d, std])
        if form == "decomposed_cast":
            n = g.node("Cast", [n], to=g.onnx_dtype)
        return g.node("Add", [g.node("Mul", [n, w]), b])


def rms_norm(g: GraphBuilder, x: str, hidden: int, name: str, *, form: str, opset: int,
             eps: float) -> str:
    """LlamaRMSNorm(hidden), written as `form` (see RMS_FORMS)."""
    if form not in RMS_FORMS:
        raise ValueError(f"unknown RMS-norm form {form!r}; expected one of {RMS_FORMS}")
    w = g.weight(f"{name}.weight", (hidden,), std=0.1, mean=1.0)
    with g.scope(name.rsplit(".", 1)[-1]):
        if form == "op":
            if opset < 23:
                raise ValueError("RMSNormalization needs opset >= 23")
            return g.node("RMSNormalization", [x, w], axis=-1, epsilon=eps)
        if form == "hf":
            # hidden.to(float32); var = hidden.pow(2).mean(-1, keepdim=True);
            # hidden = hidden * torch.rsqrt(var + eps); weight * hidden.to(input_dtype)
            x32 = g.node("Cast", [x], to=TensorProto.FLOAT)
            var = _reduce_mean(g, g.node("Pow", [x32, g.const(2.0, np.float32)]), opset)
            std = g.node("Sqrt", [g.node("Add", [var, g.const(eps, np.float32)])])
            inv = g.node("Div", [g.const(1.0, np.float32), std])  # rsqrt as torch.onnx writes it
            n = g.node("Cast", [g.node("Mul", [x32, inv])], to=g.onnx_dtype)
            return g.node("Mul", [w, n])
        if form == "reciprocal":
            var = _reduce_mean(g, g.node("Mul", [x, x]), opset)
            std = g.node("Sqrt", [g.node("Add", [var, g.const(eps)])])
            n = g.node("Mul", [x, g.node("Reciprocal", [std])])
            return g.node("Mul", [n, w])
        # "div"
        var = _reduce_mean(g, g.node("Pow", [x, g.const(2.0)]), opset)
        std = g.node("Sqrt", [g.node("Add", [var, g.const(eps)])])
        return g.node("Mul", [g.node("Div", [x, std]), w])


def split_heads(g: GraphBuilder, x: str, cfg: Config, perm) -> str:
    dims = [0, 0] if cfg.dynamic else [cfg.batch, cfg.seq]
    r = g.node("Reshape", [x, g.ints(dims + [cfg.heads, cfg.head_dim])])
    return g.node("Transpose", [r], perm=list(perm))


def attention_core(g: GraphBuilder, q: str, k: str, v: str, cfg: Config, *, mask_add: str | None = None,
                   causal_where: str | None = None, scale_mul: bool = False) -> str:
    """Scores, masking, softmax and the weighted sum; returns merged heads [B, S, H]."""
    qh = split_heads(g, q, cfg, (0, 2, 1, 3))
    kt = split_heads(g, k, cfg, (0, 2, 3, 1))  # K^T per head
    vh = split_heads(g, v, cfg, (0, 2, 1, 3))
    s = g.node("MatMul", [qh, kt])
    if scale_mul:
        s = g.node("Mul", [s, g.const(1.0 / math.sqrt(cfg.head_dim))])
    else:
        s = g.node("Div", [s, g.const(math.sqrt(cfg.head_dim))])
    if causal_where is not None:
        s = g.node("Where", [causal_where, s, g.const(-10000.0)])
    if mask_add is not None:
        s = g.node("Add", [s, mask_add])
    p = g.node("Softmax", [s], axis=-1)
    ctx = g.node("Transpose", [g.node("MatMul", [p, vh])], perm=[0, 2, 1, 3])
    dims = [0, 0] if cfg.dynamic else [cfg.batch, cfg.seq]
    return g.node("Reshape", [ctx, g.ints(dims + [cfg.hidden])])


def rotary(g: GraphBuilder, x: str, seq: int, d: int) -> str:
    """HF rotate-half rotary embedding on a [B, H, S, D] value, cos / sin as constants."""
    inv = 1.0 / (10000 ** (np.arange(0, d, 2) / d))
    emb = np.concatenate([np.outer(np.arange(seq), inv)] * 2, axis=-1)[None, None]
    cos, sin = g.tensor("rotary.cos", np.cos(emb).astype(g.dtype)), g.tensor("rotary.sin", np.sin(emb).astype(g.dtype))
    x1 = g.node("Slice", [x, g.ints([0]), g.ints([d // 2]), g.ints([3])])
    x2 = g.node("Slice", [x, g.ints([d // 2]), g.ints([d]), g.ints([3])])
    rot = g.node("Concat", [g.node("Neg", [x2]), x1], axis=-1)
    return g.node("Add", [g.node("Mul", [x, cos]), g.node("Mul", [rot, sin])])


def repeat_kv(g: GraphBuilder, x: str, cfg: Config, kv: int) -> str:
    """HF repeat_kv: x[:, :, None].expand(B, kv, n_rep, S, D).reshape(B, kv * n_rep, S, D)."""
    rep = cfg.heads // kv
    if rep == 1:
        return x
    e = g.node("Expand", [g.node("Unsqueeze", [x, g.ints([2])]), g.ints([cfg.batch, kv, rep, cfg.seq, cfg.head_dim])])
    return g.node("Reshape", [e, g.ints([cfg.batch, cfg.heads, cfg.seq, cfg.head_dim])])


def gqa_attention(g: GraphBuilder, q: str, k: str, v: str, cfg: Config, kv: int, mask_add: str, *,
                  rope: bool) -> str:
    """HF LlamaAttention (eager): heads split, rotary, repeat_kv, Q.K^T * scaling + causal mask,
    softmax in float32 (Cast there and back), weighted sum, merged heads."""
    B, S, D = cfg.batch, cfg.seq, cfg.head_dim

    def split(x, n):
        return g.node("Transpose", [g.node("Reshape", [x, g.ints([B, S, n, D])])], perm=[0, 2, 1, 3])

    qh, kh, vh = split(q, cfg.heads), split(k, kv), split(v, kv)
    if rope:
        qh, kh = rotary(g, qh, S, D), rotary(g, kh, S, D)
    kh, vh = repeat_kv(g, kh, cfg, kv), repeat_kv(g, vh, cfg, kv)
    s = g.node("MatMul", [qh, g.node("Transpose", [kh], perm=[0, 1, 3, 2])])
    s = g.node("Add", [g.node("Mul", [s, g.const(1.0 / math.sqrt(D))]), mask_add])
    p = g.node("Cast", [g.node("Softmax", [g.node("Cast", [s], to=TensorProto.FLOAT)], axis=-1)], to=g.onnx_dtype)
    ctx = g.node("Transpose", [g.node("MatMul", [p, vh])], perm=[0, 2, 1, 3])
    return g.node("Reshape", [ctx, g.ints([B, S, cfg.hidden])])


def gelu_erf(g: GraphBuilder, x: str) -> str:
    # x * 0.5 * (1.0 + erf(x / sqrt(2)))
    e = g.node("Erf", [g.node("Div", [x, g.const(math.sqrt(2.0))])])
    return g.node("Mul", [g.node("Mul", [x, g.node("Add", [e, g.const(1.0)])]), g.const(0.5)])


def gelu_tanh(g: GraphBuilder, x: str) -> str:
    # 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))  (GPT-2 gelu_new)
    cube = g.node("Mul", [g.const(0.044715), g.node("Pow", [x, g.const(3.0)])])
    t = g.node("Tanh", [g.node("Mul", [g.const(math.sqrt(2.0 / math.pi)), g.node("Add", [x, cube])])])
    return g.node("Mul", [g.node("Mul", [g.const(0.5), x]), g.node("Add", [g.const(1.0), t])])


def _rename_output(g: GraphBuilder, value: str, name: str) -> str:
    for node in g.nodes:
        for i, out in enumerate(node.output):
            if out == value:
                node.output[i] = name
        for i, inp in enumerate(node.input):
            if inp == value:
                node.input[i] = name
    return name


def _finish(g: GraphBuilder, y: str, cfg: Config, opset: int, doc: str, **meta) -> onnx.ModelProto:
    y = _rename_output(g, y, "last_hidden_state")
    bs = ["batch", "sequence"] if cfg.dynamic else [cfg.batch, cfg.seq]
    g.outputs.append(onnx.helper.make_tensor_value_info(y, g.onnx_dtype, bs + [cfg.hidden]))
    model = g.model(opset, doc=doc)
    meta = {"vocab_size": cfg.vocab, "type_vocab_size": cfg.type_vocab, **meta}
    if cfg.dynamic:  # sizes example_inputs() uses for the dynamic axes
        meta.update({"dim.batch": cfg.batch, "dim.sequence": cfg.seq})
    onnx.helper.set_model_props(model, {k: str(v) for k, v in meta.items()})
    return model


# ---------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------
def bert(config: str | Config = "tiny", *, ln: str = "op", opset: int | None = None,
         dtype: str = "float32", seed: int = 0, batch: int | None = None, seq: int | None = None,
         layers: int | None = None, dynamic: bool = False, mask_unsqueezes: int = 1) -> onnx.ModelProto:
    """BERT encoder; `ln` picks the layer-norm form (LN_FORMS).

    Default opsets: 17 for the LayerNormalization op, 13 (ReduceMean axes as an
    attribute) for the decomposed forms; pass opset=18 for axes as an input.
    mask_unsqueezes: the padding mask's mask[:, None, None, :] as one Unsqueeze (axes [1, 2])
    or as two (axes [1] then [2]), as torch.onnx.export's TorchScript path writes it (the form
    onnxruntime.transformers' attention fusion matches).
    """
    if mask_unsqueezes not in (1, 2):
        raise ValueError(f"mask_unsqueezes must be 1 or 2, got {mask_unsqueezes!r}")
    cfg = _config(config, batch=batch, seq=seq, layers=layers, dynamic=dynamic or None)
    opset = opset or (17 if ln == "op" else 13)
    g = GraphBuilder(f"bert_{ln}", dtype=dtype, seed=seed)
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    BS = ["batch", "sequence"] if cfg.dynamic else [B, S]
    ids = g.input("input_ids", TensorProto.INT64, BS)
    types = g.input("token_type_ids", TensorProto.INT64, BS)
    mask = g.input("attention_mask", TensorProto.INT64, BS)
    norm = dict(form=ln, opset=opset, eps=cfg.eps)

    with g.scope("embeddings"):
        word = g.node("Gather", [g.weight("embeddings.word_embeddings.weight", (cfg.vocab, H)), ids])
        tok = g.node("Gather", [g.weight("embeddings.token_type_embeddings.weight", (cfg.type_vocab, H)), types])
        if cfg.dynamic:
            # position_ids[:, :seq_len] as torch.onnx writes the slice of the buffer
            all_pos = g.tensor("embeddings.position_ids", np.arange(cfg.max_positions, dtype=np.int64)[None, :])
            seq_len = g.node("Unsqueeze", [g.node("Gather", [g.node("Shape", [ids]), g.const(1, np.int64)],
                                                  axis=0), g.ints([0])])
            pos_ids = g.node("Slice", [all_pos, g.ints([0]), seq_len, g.ints([1])])
        else:
            pos_ids = g.tensor("embeddings.position_ids", np.arange(S, dtype=np.int64)[None, :])
        pos = g.node("Gather", [g.weight("embeddings.position_embeddings.weight", (cfg.max_positions, H)), pos_ids])
        e = g.node("Add", [g.node("Add", [word, tok]), pos])
        h = layer_norm(g, e, H, "embeddings.LayerNorm", **norm)
    # (1 - mask[:, None, None, :]) * -10000
    with g.scope("extended_mask"):
        if mask_unsqueezes == 1:
            m = g.node("Unsqueeze", [mask, g.ints([1, 2])])
        else:
            m = g.node("Unsqueeze", [g.node("Unsqueeze", [mask, g.ints([1])]), g.ints([2])])
        m = g.node("Cast", [m], to=g.onnx_dtype)
        mask_add = g.node("Mul", [g.node("Sub", [g.const(1.0), m]), g.const(-10000.0)])

    for i in range(cfg.layers):
        p = f"encoder.layer.{i}"
        with g.scope("encoder"), g.scope(f"layer.{i}"):
            with g.scope("attention"), g.scope("self"):
                q = linear(g, h, H, H, f"{p}.attention.self.query")
                k = linear(g, h, H, H, f"{p}.attention.self.key")
                v = linear(g, h, H, H, f"{p}.attention.self.value")
                ctx = attention_core(g, q, k, v, cfg, mask_add=mask_add)
            with g.scope("attention"), g.scope("output"):
                a = linear(g, ctx, H, H, f"{p}.attention.output.dense")
                h = layer_norm(g, g.node("Add", [a, h]), H, f"{p}.attention.output.LayerNorm", **norm)
            with g.scope("intermediate"):
                f = gelu_erf(g, linear(g, h, H, cfg.intermediate, f"{p}.intermediate.dense"))
            with g.scope("output"):
                f = linear(g, f, cfg.intermediate, H, f"{p}.output.dense")
                h = layer_norm(g, g.node("Add", [f, h]), H, f"{p}.output.LayerNorm", **norm)
    return _finish(g, h, cfg, opset, f"BERT encoder, layer norm as {ln!r}, opset {opset}",
                   layer_norms=1 + 2 * cfg.layers)


def gpt(config: str | Config = "tiny", *, ln: str = "op", opset: int | None = None,
        dtype: str = "float32", seed: int = 0, batch: int | None = None, seq: int | None = None,
        layers: int | None = None) -> onnx.ModelProto:
    """GPT-2-style pre-LN decoder with a causal mask."""
    cfg = _config(config, batch=batch, seq=seq, layers=layers)
    opset = opset or (17 if ln == "op" else 13)
    g = GraphBuilder(f"gpt_{ln}", dtype=dtype, seed=seed)
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    ids = g.input("input_ids", TensorProto.INT64, [B, S])
    norm = dict(form=ln, opset=opset, eps=1e-5)

    wte = g.node("Gather", [g.weight("wte.weight", (cfg.vocab, H)), ids])
    pos_ids = g.tensor("position_ids", np.arange(S, dtype=np.int64)[None, :])
    h = g.node("Add", [wte, g.node("Gather", [g.weight("wpe.weight", (cfg.max_positions, H)), pos_ids])])
    causal = g.tensor("causal_mask", np.tril(np.ones((S, S), dtype=bool))[None, None])

    for i in range(cfg.layers):
        p = f"h.{i}"
        with g.scope("h." + str(i)):
            x = layer_norm(g, h, H, f"{p}.ln_1", **norm)
            with g.scope("attn"):
                qkv = linear(g, x, H, 3 * H, f"{p}.attn.c_attn")
                q, k, v = g.node("Split", [qkv, g.ints([H, H, H])], outputs=3, axis=2)
                a = linear(g, attention_core(g, q, k, v, cfg, causal_where=causal), H, H, f"{p}.attn.c_proj")
            h = g.node("Add", [a, h])
            x = layer_norm(g, h, H, f"{p}.ln_2", **norm)
            with g.scope("mlp"):
                m = gelu_tanh(g, linear(g, x, H, 4 * H, f"{p}.mlp.c_fc"))
                m = linear(g, m, 4 * H, H, f"{p}.mlp.c_proj")
            h = g.node("Add", [h, m])
    y = layer_norm(g, h, H, "ln_f", **norm)
    return _finish(g, y, cfg, opset, f"GPT-2-style pre-LN decoder, layer norm as {ln!r}, opset {opset}",
                   layer_norms=2 * cfg.layers + 1)


def llama(config: str | Config = "tiny", *, rms: str = "hf", opset: int | None = None,
          dtype: str = "float32", seed: int = 0, batch: int | None = None, seq: int | None = None,
          layers: int | None = None, kv_heads: int | None = None, rope: bool = False,
          attention: str = "decomposed") -> onnx.ModelProto:
    """Llama-style decoder block stack, RMSNorm written as `rms`.

    kv_heads: grouped-query attention (K / V projections of kv_heads heads, HF repeat_kv,
    float32 softmax with Casts, causal mask of finfo.min); rope: rotary embeddings on Q / K;
    attention="op": the ONNX Attention op (opset 23, 3-D, is_causal) instead of the
    decomposed pattern. Default opsets: 23 for the RMSNormalization or Attention op, 18
    (ReduceMean axes as an input, as the dynamo exporter writes it) for the decomposed forms.
    """
    if attention not in ("decomposed", "op"):
        raise ValueError(f"unknown attention form {attention!r}; expected 'decomposed' or 'op'")
    if attention == "op" and (opset or 23) < 23:
        raise ValueError("the Attention op needs opset >= 23")
    cfg = _config(config, batch=batch, seq=seq, layers=layers)
    opset = opset or (23 if rms == "op" or attention == "op" else 18)
    g = GraphBuilder(f"llama_{rms}", dtype=dtype, seed=seed)
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    inter = cfg.intermediate // 2
    ids = g.input("input_ids", TensorProto.INT64, [B, S])
    norm = dict(form=rms, opset=opset, eps=1e-6)

    h = g.node("Gather", [g.weight("model.embed_tokens.weight", (cfg.vocab, H)), ids])
    causal = np.triu(np.full((S, S), -10000.0, dtype=g.dtype), k=1)[None, None]
    mask_add = gqa_mask = None
    if attention == "op":
        pass  # is_causal on the op
    elif not (kv_heads or rope):
        mask_add = g.tensor("causal_mask", causal)
    else:  # HF: the causal mask filled with finfo(dtype).min
        gqa_mask = g.tensor("causal_mask_min", np.triu(np.full((S, S), np.finfo(g.dtype).min, dtype=g.dtype),
                                                       k=1)[None, None])
    for i in range(cfg.layers):
        p = f"model.layers.{i}"
        with g.scope("model"), g.scope(f"layers.{i}"):
            x = rms_norm(g, h, H, f"{p}.input_layernorm", **norm)
            with g.scope("self_attn"):
                kvh = kv_heads or cfg.heads
                q = linear(g, x, H, H, f"{p}.self_attn.q_proj", bias=False)
                k = linear(g, x, H, kvh * cfg.head_dim, f"{p}.self_attn.k_proj", bias=False)
                v = linear(g, x, H, kvh * cfg.head_dim, f"{p}.self_attn.v_proj", bias=False)
                if attention == "op":
                    ctx = g.node("Attention", [q, k, v], is_causal=1, q_num_heads=cfg.heads, kv_num_heads=kvh,
                                 scale=1.0 / math.sqrt(cfg.head_dim))
                elif kv_heads or rope:
                    ctx = gqa_attention(g, q, k, v, cfg, kvh, gqa_mask, rope=rope)
                else:
                    ctx = attention_core(g, q, k, v, cfg, mask_add=mask_add, scale_mul=True)
                a = linear(g, ctx, H, H, f"{p}.self_attn.o_proj", bias=False)
            h = g.node("Add", [h, a])
            x = rms_norm(g, h, H, f"{p}.post_attention_layernorm", **norm)
            with g.scope("mlp"):
                gate = linear(g, x, H, inter, f"{p}.mlp.gate_proj", bias=False)
                up = linear(g, x, H, inter, f"{p}.mlp.up_proj", bias=False)
                act = g.node("Mul", [gate, g.node("Sigmoid", [gate])])  # SiLU
                m = linear(g, g.node("Mul", [act, up]), inter, H, f"{p}.mlp.down_proj", bias=False)
            h = g.node("Add", [h, m])
    with g.scope("model"):
        y = rms_norm(g, h, H, "model.norm", **norm)
    return _finish(g, y, cfg, opset, f"Llama-style decoder, RMSNorm as {rms!r}, opset {opset}",
                   rms_norms=2 * cfg.layers + 1)


def vit(config: str | Config = "tiny", *, opset: int = 17, dtype: str = "float32", seed: int = 0,
        batch: int | None = None, seq: int | None = None, layers: int | None = None, patch: int = 4,
        grid: tuple[int, int] | None = None) -> onnx.ModelProto:
    """ViT-style encoder (timm): a patch x patch Conv (stride patch) over an image
    [B, 3, patch * grid[0], patch * grid[1]] gives seq = grid[0] * grid[1] patches (grid
    defaults to (2, seq / 2); ViT-B/16 at 224: patch=16, grid=(14, 14)), + position embeddings,
    then pre-LN blocks with timm's fused QKV attention (Linear -> Reshape [B, N, 3, H, D] ->
    Transpose (2, 0, 3, 1, 4) -> Gather 0 / 1 / 2, q * scale, q @ k.transpose(-2, -1), Softmax,
    @ v) and a GELU MLP, final LayerNorm."""
    cfg = _config(config, batch=batch, seq=seq, layers=layers)
    if grid is None:
        if cfg.seq % 2:
            raise ValueError("vit needs an even sequence length (a 2 x seq/2 patch grid) or an explicit grid")
        grid = (2, cfg.seq // 2)
    if grid[0] * grid[1] != cfg.seq:
        raise ValueError(f"vit: grid {tuple(grid)} has {grid[0] * grid[1]} patches, expected seq={cfg.seq}")
    g = GraphBuilder("vit", dtype=dtype, seed=seed)
    B, N, H, D = cfg.batch, cfg.seq, cfg.hidden, cfg.head_dim
    norm = dict(form="op", opset=opset, eps=1e-6)
    px = g.input("pixel_values", g.onnx_dtype, [B, 3, patch * grid[0], patch * grid[1]])
    with g.scope("patch_embed"):
        # std keeps the patch embedding O(1) whatever the patch size (fan-in 3 * patch^2)
        w = g.weight("patch_embed.proj.weight", (H, 3, patch, patch), std=0.2 * 4 / patch)
        e = g.node("Conv", [px, w, g.weight("patch_embed.proj.bias", (H,), std=0.1)], kernel_shape=[patch, patch],
                   strides=[patch, patch])
        e = g.node("Transpose", [g.node("Reshape", [e, g.ints([B, H, N])])], perm=[0, 2, 1])
    h = g.node("Add", [e, g.weight("pos_embed", (1, N, H), std=0.5)])
    for i in range(cfg.layers):
        p = f"blocks.{i}"
        with g.scope(p):
            x = layer_norm(g, h, H, f"{p}.norm1", **norm)
            with g.scope("attn"):
                qkv = linear(g, x, H, 3 * H, f"{p}.attn.qkv")
                qkv = g.node("Transpose", [g.node("Reshape", [qkv, g.ints([B, N, 3, cfg.heads, D])])],
                             perm=[2, 0, 3, 1, 4])
                q, k, v = (g.node("Gather", [qkv, g.const(j, np.int64)], axis=0) for j in range(3))
                q = g.node("Mul", [q, g.const(D ** -0.5)])
                a = g.node("Softmax", [g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])], axis=-1)
                ctx = g.node("Transpose", [g.node("MatMul", [a, v])], perm=[0, 2, 1, 3])
                ctx = g.node("Reshape", [ctx, g.ints([B, N, H])])
                h = g.node("Add", [h, linear(g, ctx, H, H, f"{p}.attn.proj")])
            x = layer_norm(g, h, H, f"{p}.norm2", **norm)
            with g.scope("mlp"):
                m = linear(g, gelu_erf(g, linear(g, x, H, cfg.intermediate, f"{p}.mlp.fc1")), cfg.intermediate, H,
                           f"{p}.mlp.fc2")
            h = g.node("Add", [h, m])
    y = layer_norm(g, h, H, "norm", **norm)
    return _finish(g, y, cfg, opset, f"ViT-style encoder (timm attention), opset {opset}",
                   layer_norms=2 * cfg.layers + 1)

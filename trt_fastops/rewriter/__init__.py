"""Rewrite ONNX graphs to use the trt_fastops ops.

    from trt_fastops.rewriter import rewrite, rewrite_file
    result = rewrite(model)                    # onnx.ModelProto, onnx_ir.Model, str or Path
    result.model                               # the rewritten onnx.ModelProto
    print(result.report.to_text())             # every rewrite and every refusal
    rewrite_file("in.onnx", "out.onnx", report_path="report.json")   # external data stays external
    rewrite(model, conv="fallback")            # also convolutions (see conv.py for the policies)
    rewrite(model, target="ort")               # ONNX Runtime only: also BiasGelu / FastGelu, Dense, packed QKV,
                                               # EmbedLayerNorm

Rules (one per module, each an onnxscript RewriteRuleClassBase with pattern / check / rewrite):
layer_norm, layer_norm_decomposed -> LayerNorm; skip_layer_norm -> SkipLayerNorm;
rms_norm, rms_norm_decomposed, skip_rms_norm -> RMSNorm; attention (the ONNX Attention op),
attention_decomposed (MatMul / scale / mask / Softmax / MatMul as exporters write it) and
attention_mha (com.microsoft MultiHeadAttention) -> Attention; conv -> Conv, conv_transpose ->
ConvTranspose (each with a folded activation when one follows); bias_gelu -> ONNX Runtime's
com.microsoft BiasGelu / FastGelu, packed_qkv -> one Q/K/V MatMul feeding Attention(packed_qkv=1),
dense -> Dense (MatMul + bias in one cuBLASLt GEMM), dense_gelu -> Dense(activation="gelu") for
MatMul + bias + exact GELU (before bias_gelu), embed_layer_norm -> EmbedLayerNorm for BERT's
embedding (three Gathers of token, type and position 0..S-1 rows, their sum and its
SkipLayerNorm) (these five for target "ort" only). The
norm and conv rules run first (largest patterns first), then the skip fusions, then bias_gelu,
packed_qkv and dense, with dead-code removal after each pass.

Targets: "portable" (the default) emits standard ONNX and trt_fastops ops only, so one file
runs in ONNX Runtime (our custom-op library) and TensorRT (our plugins); "ort" may also emit
what only ONNX Runtime runs (ORT_OPS): its contrib ops (com.microsoft) for the parts trt_fastops
has no op for, where ONNX Runtime's own session fusions would not produce them (bias_gelu.py
says why), our Dense (no TensorRT plugin: TensorRT fuses a GEMM's bias itself) and packed Q/K/V
projections (one MatMul feeding Attention's packed_qkv; TensorRT merges such GEMMs by itself):
the faster choice for a file that only ONNX Runtime runs. An explicit `ops` list runs only the ops it names
(ORT_OPS included, "ort" target only; "FastGelu" is an alias of "BiasGelu", whose rule emits
both).

Convolutions follow a policy, conv= "off" | "fallback" | "all" (conv.py explains the fallback
rule). By default (conv=None) it is "off", unless `ops` names Conv or ConvTranspose
explicitly, which means "all"; naming them together with conv="off" is an error.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Iterable

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as ir_passes
from onnxscript.rewriter import RULE_NAME_TAG
from onnxscript.rewriter import pattern as orp

from . import attention, attention_decomposed, attention_mha, bias_gelu, embed_layer_norm
from . import conv as conv_rules
from . import (conv_transpose, dense, dense_gelu, layer_norm, layer_norm_decomposed, packed_qkv, rms_norm,
               rms_norm_decomposed, skip_layer_norm, skip_rms_norm)
from ._common import DOMAIN, ORT_DOMAIN, Recorder, recording
from ._report import RefusalRecord, RewriteRecord, RewriteReport

__all__ = ["ALL_OPS", "CONV_OPS", "CONV_POLICIES", "MAX_IR_VERSION", "OP_ALIASES", "ORT_OPS", "TARGETS", "RewriteError",
           "RewriteReport", "RewriteResult", "rewrite", "rewrite_file", "rule_modules"]

ALL_OPS = ("LayerNorm", "SkipLayerNorm", "RMSNorm", "Attention", "Conv", "ConvTranspose")
#: the ops governed by the conv= policy
CONV_OPS = ("Conv", "ConvTranspose")
CONV_POLICIES = conv_rules.POLICIES
#: ops only the "ort" target emits: ONNX Runtime contrib ops (domain com.microsoft; "BiasGelu"
#: names the bias_gelu rule, which emits FastGelu for the tanh forms) and our Dense and
#: EmbedLayerNorm, which have no TensorRT plugin
ORT_OPS = ("BiasGelu", "Dense", "EmbedLayerNorm")
#: other names accepted in `ops` (FastGelu comes from the same rule as BiasGelu)
OP_ALIASES = {"FastGelu": "BiasGelu"}
TARGETS = ("portable", "ort")
OPSET_VERSION = 1
#: ONNX Runtime 1.31 reads IR versions up to 13 (onnx 1.23 writes 14 by default).
MAX_IR_VERSION = 13

_MODULES = {
    "LayerNorm": (layer_norm, layer_norm_decomposed),
    "SkipLayerNorm": (skip_layer_norm,),
    "RMSNorm": (rms_norm, rms_norm_decomposed, skip_rms_norm),
    "Attention": (attention, attention_decomposed, attention_mha, packed_qkv),  # packed_qkv: "ort" only
    "Conv": (conv_rules,),
    "ConvTranspose": (conv_transpose,),
    "BiasGelu": (bias_gelu,),
    "Dense": (dense_gelu, dense),
    "EmbedLayerNorm": (embed_layer_norm,),
}


class RewriteError(ValueError):
    """The model could not be rewritten (missing file, not ONNX, invalid graph, bad arguments)."""


@dataclasses.dataclass
class RewriteResult:
    ir_model: ir.Model
    report: RewriteReport
    _proto: onnx.ModelProto | None = None

    @property
    def model(self) -> onnx.ModelProto:
        """The rewritten model as an onnx.ModelProto (external weights loaded into memory)."""
        if self._proto is None:
            self._proto = _to_proto(self.ir_model)
        return self._proto


def rule_modules(ops: Iterable[str] | None = None) -> list:
    """The rule modules that serve `ops` (None = all of ALL_OPS and ORT_OPS), in driver order."""
    mods = []
    for op in _normalize_ops(ops, ALL_OPS + ORT_OPS):
        mods += [m for m in _MODULES[op] if m not in mods]
    return mods


def rewrite(model, ops: Iterable[str] | None = None, *, plugin_attributes: bool = False,
            conv: str | None = None, target: str | None = None) -> RewriteResult:
    """Rewrite `model` to use trt_fastops ops.

    model: onnx.ModelProto, onnx_ir.Model (rewritten in place), or the path of an
    .onnx file. ops: subset of ALL_OPS (None = all). plugin_attributes: add
    plugin_version="1" / plugin_namespace="trt_fastops" to every node of ours and, where
    needed, the `outputs` / `inputs` slot bitmasks (norm and Attention nodes; a conv node never
    needs them), with no empty-name inputs, so that one file runs in ONNX Runtime and through
    TensorRT's ONNX parser with our plugins (plugins/trt/README.md, PLUGIN_SLOTS).
    conv: "off", "fallback" or "all" (None: "off" unless `ops` names a conv op).
    target: "portable" (default: standard ONNX and trt_fastops ops only; ONNX Runtime and
    TensorRT) or "ort" (ONNX Runtime only: ORT_OPS contrib ops too; not with plugin_attributes).
    Raises RewriteError for unreadable or invalid models or bad arguments.
    """
    target = _resolve_target(target, plugin_attributes)
    ops, conv = _resolve_ops(ops, conv, target)
    ir_model = _load(model)
    report = _run(ir_model, ops, plugin_attributes=plugin_attributes, conv=conv, target=target)
    return RewriteResult(ir_model, report)


def rewrite_file(in_path, out_path, ops: Iterable[str] | None = None, *, report_path=None,
                 plugin_attributes: bool = False, conv: str | None = None, target: str | None = None) -> RewriteResult:
    """Rewrite the model file `in_path` into `out_path` (and the JSON report into report_path).

    Weights stored as external data stay external: they are written to
    `<out_path name>.data` next to out_path without being inlined.
    """
    target = _resolve_target(target, plugin_attributes)
    ops, conv = _resolve_ops(ops, conv, target)
    ir_model = _load_path(in_path)
    external = any(isinstance(v.const_value, ir.ExternalTensor) for v in ir_model.graph.initializers.values())
    report = _run(ir_model, ops, plugin_attributes=plugin_attributes, conv=conv, target=target)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if external:
            data = out_path.name + ".data"
            if _reads_from(ir_model, out_path.parent / data):
                # rewriting in place: the weights must be read before their file is replaced
                ir.external_data.load_to_model(ir_model)
            ir.save(ir_model, out_path, external_data=data)
        else:
            ir.save(ir_model, out_path)
    except OSError as e:
        raise RewriteError(f"cannot write {out_path}: {e}") from e
    if report_path is not None:
        Path(report_path).write_text(report.to_json() + "\n")
    return RewriteResult(ir_model, report)


def _reads_from(model: ir.Model, data_path: Path) -> bool:
    if not data_path.exists():
        return False
    target = data_path.resolve()
    for v in model.graph.initializers.values():
        t = v.const_value
        if isinstance(t, ir.ExternalTensor) and Path(t.path).resolve() == target:
            return True
    return False


# ---------------------------------------------------------------------------
# loading and validation
# ---------------------------------------------------------------------------
def _normalize_ops(ops, default=ALL_OPS) -> list[str]:
    known = ALL_OPS + ORT_OPS
    if ops is None:
        return list(default)
    if isinstance(ops, str):
        ops = [o.strip() for o in ops.split(",") if o.strip()]
    ops = [OP_ALIASES.get(o, o) for o in ops]
    bad = [o for o in ops if o not in known]
    if bad:
        raise RewriteError(f"unknown op(s) {', '.join(map(repr, bad))}; choose from {', '.join(known)} "
                           f"({', '.join(f'{a} = {o}' for a, o in OP_ALIASES.items())})")
    return [o for o in known if o in ops]  # canonical order, no duplicates


def _resolve_target(target, plugin_attributes: bool) -> str:
    target = "portable" if target is None else target
    if target not in TARGETS:
        raise RewriteError(f"unknown target {target!r}; choose from {', '.join(TARGETS)}")
    if target == "ort" and plugin_attributes:
        raise RewriteError("plugin_attributes makes a file for TensorRT, whose parser cannot read the ONNX Runtime "
                           "contrib ops of target='ort'; use target='portable'")
    return target


def _resolve_ops(ops, conv, target: str = "portable") -> tuple[list[str], str]:
    """The ops to rewrite and the conv policy (conv ops are dropped when it is "off"; ONNX
    Runtime contrib ops are in the default set only for the "ort" target)."""
    explicit = ops is not None
    ops = _normalize_ops(ops, ALL_OPS + (ORT_OPS if target == "ort" else ()))
    contrib = [o for o in ops if o in ORT_OPS]
    if contrib and target != "ort":
        raise RewriteError(f"ops names {', '.join(contrib)} (ONNX Runtime-only ops) but target={target!r}; "
                           "only target='ort' emits them")
    named = [o for o in ops if o in CONV_OPS] if explicit else []
    if conv is None:
        conv = "all" if named else "off"
    if conv not in CONV_POLICIES:
        raise RewriteError(f"unknown conv policy {conv!r}; choose from {', '.join(CONV_POLICIES)}")
    if conv == "off":
        if named:
            raise RewriteError(f"ops names {', '.join(named)} but conv='off'; use conv='fallback' or 'all'")
        ops = [o for o in ops if o not in CONV_OPS]
    return ops, conv


def _load_path(path) -> ir.Model:
    path = Path(os.fspath(path))
    if not path.exists():
        raise RewriteError(f"{path}: no such file")
    if path.is_dir():
        raise RewriteError(f"{path}: is a directory, expected an .onnx file")
    try:
        model = ir.load(path)
    except Exception as e:  # protobuf DecodeError and friends
        raise RewriteError(f"{path}: not an ONNX model ({type(e).__name__}: {e})") from e
    _validate(model, str(path))
    return model


def _load(model) -> ir.Model:
    if isinstance(model, (str, os.PathLike)):
        return _load_path(model)
    if isinstance(model, onnx.ModelProto):
        try:
            m = ir.serde.deserialize_model(model)
        except Exception as e:
            raise RewriteError(f"invalid ONNX model: {type(e).__name__}: {e}") from e
        _validate(m, "model")
        return m
    if isinstance(model, ir.Model):
        _validate(model, "model")
        return model
    raise RewriteError(f"expected an onnx.ModelProto, onnx_ir.Model, str or Path, got {type(model).__name__}")


def _validate(model: ir.Model, what: str) -> None:
    if not model.graph.opset_imports or ("" not in model.graph.opset_imports
                                          and "ai.onnx" not in model.graph.opset_imports):
        if len(model.graph) == 0:
            raise RewriteError(f"{what}: not an ONNX model (no graph nodes and no ONNX opset import)")
        raise RewriteError(f"{what}: invalid ONNX model: it imports no version of the ONNX opset")
    try:
        onnx.checker.check_model(_structure_proto(model))
    except Exception as e:
        msg = str(e).strip().splitlines()
        raise RewriteError(f"{what}: invalid ONNX model: {' '.join(msg)[:2000]}") from e


def _structure_proto(model: ir.Model) -> onnx.ModelProto:
    """The model as a ModelProto with every initializer turned into a graph input.

    The checker validates structure, not weights; this keeps large (or external,
    possibly not yet readable) weights out of the proto. The IR model is restored.
    """
    graph = model.graph
    values = list(graph.initializers.values())
    n_inputs = len(graph.inputs)
    try:
        for v in values:
            if v.const_value is not None:
                if v.shape is None:
                    v.shape = v.const_value.shape
                if v.dtype is None:
                    v.dtype = v.const_value.dtype
            if v not in graph.inputs:
                graph.inputs.append(v)
        graph.initializers.clear()
        return ir.serde.serialize_model(model)
    finally:
        for v in values:
            graph.initializers.add(v)
        inputs = graph.inputs[:n_inputs]
        graph.inputs.clear()
        graph.inputs.extend(inputs)


def _to_proto(model: ir.Model) -> onnx.ModelProto:
    if any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values()):
        ir.external_data.load_to_model(model)
    return ir.serde.serialize_model(model)


# ---------------------------------------------------------------------------
# the pipeline
# ---------------------------------------------------------------------------
def _stages(ops: list[str], target: str = "portable") -> list[list[orp.RewriteRule]]:
    rules = [r for m in rule_modules(ops) for r in m.rules()
             if target == "ort" or not getattr(r.trt_fastops_rule, "ORT_ONLY", False)]
    keys = sorted({(r.trt_fastops_rule.STAGE, -r.trt_fastops_rule.size) for r in rules})
    return [[r for r in rules if (r.trt_fastops_rule.STAGE, -r.trt_fastops_rule.size) == k] for k in keys]


def _run(model: ir.Model, ops: list[str], *, plugin_attributes: bool, conv: str = "off",
         target: str = "portable") -> RewriteReport:
    ir_passes.NameFixPass()(model)  # every node named, for the report
    ir_passes.ShapeInferencePass(check_type=False, strict_mode=False, data_prop=True)(model)
    recorder = Recorder(model.graph)
    with recording(recorder), conv_rules.policy(conv):
        for group in _stages(ops, target):
            if orp.RewriteRuleSet(group).apply_to_model(model):
                ir_passes.RemoveUnusedNodesPass()(model)
                # a Sum output may feed nodes placed before the new node
                ir_passes.TopologicalSortPass()(model)
    ir_passes.RemoveUnusedNodesPass()(model)
    if recorder.rewrites:
        # shapes of the values the rules emitted with standard ops (Transpose, Cast, Where, ...),
        # so that the output has the value_info a second rewrite would add (idempotence)
        ir_passes.ShapeInferencePass(check_type=False, strict_mode=False, data_prop=True)(model)
    report = RewriteReport(ops=list(ops), conv=conv, target=target)
    _tidy_names(model, recorder)
    _collect(model, recorder, report)
    _finish(model, report, plugin_attributes=plugin_attributes)
    return report


def _tidy_names(model: ir.Model, rec: Recorder) -> None:
    """'.../SkipLayerNorm_1' -> '.../SkipLayerNorm' where the suffix was only needed while the
    node it replaced (e.g. our own '.../LayerNorm' of the first stage) still existed."""
    taken = {n.name for n in model.graph}
    for node in model.graph:
        base = rec.generated.get(node.name or "")
        if base and base != node.name and base not in taken:
            taken.discard(node.name)
            node.name = base
            taken.add(base)


def _collect(model: ir.Model, rec: Recorder, report: RewriteReport) -> None:
    """Events -> report records: chain rewrites (LayerNorm then SkipLayerNorm) back to the
    original nodes, keep only nodes that are in the final graph, drop refusals of nodes that
    some other rule did rewrite, and duplicates."""
    created = {ev.node: ev for ev in rec.rewrites}
    origin: dict = {}  # our node -> (original nodes, rules)
    for ev in rec.rewrites:
        nodes, rules = [], []
        for n in ev.replaced:
            if n in origin:
                sub_nodes, sub_rules = origin[n]
                nodes += sub_nodes
                rules += [r for r in sub_rules if r not in rules]
            else:
                nodes.append(n)
        rules.append(ev.rule)
        origin[ev.node] = (nodes, rules)
    in_graph = set(model.graph)
    rewritten_originals = set()
    for ev in rec.rewrites:
        if ev.node not in in_graph:
            continue  # consumed by a later rule (e.g. LayerNorm -> SkipLayerNorm)
        nodes, rules = origin[ev.node]
        if "sum_output" in ev.details:  # from the final graph, not the graph at rewrite time
            total = ev.node.outputs[3 if ev.node.op_type == "SkipLayerNorm" else 1]
            ev.details["sum_output"] = bool(total.uses()) or total.is_graph_output()
        rewritten_originals.update(nodes)
        rewritten_originals.update(n for n in ev.replaced if n in created)
        report.rewrites.append(RewriteRecord(
            op=ev.node.op_type, node=ev.node.name or "", rules=rules,
            replaced=[n.name or "" for n in nodes], replaced_ops=[n.op_type for n in nodes],
            details=dict(ev.details)))
    kept: list = []
    for rf in rec.refusals:
        if any(n in rewritten_originals for n in rf.nodes):
            continue
        key_nodes = set(rf.nodes)
        dup = False
        for other in kept:
            if other.rule == rf.rule and other.reason == rf.reason and (
                    key_nodes <= set(other.nodes) or set(other.nodes) <= key_nodes):
                if len(key_nodes) > len(other.nodes):
                    kept[kept.index(other)] = rf
                dup = True
                break
        if not dup:
            kept.append(rf)
    order = {n: i for i, n in enumerate(model.graph)}
    for rf in kept:
        nodes = sorted(rf.nodes, key=lambda n: order.get(n, -1))
        report.refusals.append(RefusalRecord(rule=rf.rule, op=rf.op, nodes=[n.name or "" for n in nodes],
                                             node_ops=[n.op_type for n in nodes], reason=rf.reason))


def _finish(model: ir.Model, report: RewriteReport, *, plugin_attributes: bool) -> None:
    ours = [n for n in model.graph if n.domain == DOMAIN]
    for node in ours:
        node.metadata_props.pop(RULE_NAME_TAG, None)
        for v in node.outputs[1:]:
            # optional outputs nobody reads are left out ("" in the NodeProto)
            if not v.uses() and not v.is_graph_output():
                v.name = ""
                v.type = None
                v.shape = None
        if plugin_attributes and node.op_type in PLUGIN_SLOTS:
            _add_plugin_fields(node)
    model.graph.opset_imports[DOMAIN] = OPSET_VERSION
    if any(n.domain == ORT_DOMAIN for n in model.graph) and ORT_DOMAIN not in model.graph.opset_imports:
        model.graph.opset_imports[ORT_DOMAIN] = 1
    model.ir_version = _ir_version(model, report)
    if model.ir_version < 10:  # NodeProto.metadata_props exists from IR 10 on
        for node in ours:
            node.metadata_props.clear()
    report.ir_version = model.ir_version
    report.opset_imports = dict(sorted(model.graph.opset_imports.items()))


#: op -> (input slots, output slots) of the TensorRT plugins, in the op's order
#: (plugins/norm/norm_op.h, plugins/conv/conv_op.h, plugins/attention/attention_op.h).
#: Every op of ALL_OPS has a plugin (plugins/trt/*_plugin.cc).
PLUGIN_SLOTS = {
    "LayerNorm": (("X", "Scale", "B"), ("Y", "Mean", "InvStdDev")),
    "SkipLayerNorm": (("X", "Skip", "Scale", "B", "Bias"), ("Y", "Mean", "InvStdDev", "Sum")),
    "RMSNorm": (("X", "Scale", "Skip", "Bias"), ("Y", "Sum")),
    "Attention": (("Q", "K", "V", "attn_mask", "past_key", "past_value"),
                  ("Y", "present_key", "present_value", "qk_matmul_output")),
    "Conv": (("X", "W", "B"), ("Y",)),
    "ConvTranspose": (("X", "W", "B"), ("Y",)),
}
#: the ops whose plugin creators take the `inputs` / `outputs` fields. The conv plugins do not:
#: their one optional input is the last one and Y their only output, so positions are slots.
SLOT_MASK_OPS = ("LayerNorm", "SkipLayerNorm", "RMSNorm", "Attention")
#: node attributes for TensorRT's ONNX parser (before 10.10); it passes neither to the plugin
PARSER_ATTRIBUTES = ("plugin_version", "plugin_namespace")


def _add_plugin_fields(node: ir.Node) -> None:
    """Make `node` readable by TensorRT's ONNX parser + our plugins (plugins/trt/README.md)
    without losing ONNX Runtime: plugin_version / plugin_namespace (parsers before 10.10),
    `outputs` = bitmask of the present output slots when there is more than Y, and no
    empty-name inputs: a missing middle optional input is dropped and `inputs` names the
    slots that remain (our ORT ops map positions back to slots through it)."""
    for key, val in zip(PARSER_ATTRIBUTES, ("1", DOMAIN)):
        if key not in node.attributes:
            node.attributes[key] = ir.AttrString(key, val)
    in_slots, out_slots = PLUGIN_SLOTS[node.op_type]
    masks = node.op_type in SLOT_MASK_OPS
    out_mask = sum(1 << k for k, v in enumerate(node.outputs) if k == 0 or v.name)
    inputs = list(node.inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    gap = any(v is None for v in inputs)
    if len(node.outputs) > len(out_slots) or len(inputs) > len(in_slots) or (
            not masks and (out_mask != 1 or gap)):
        # the rules never emit such a node; the plugin could not take it
        raise RewriteError(f"internal error: {node.op_type} node {node.name!r} has {len(inputs)} inputs "
                           f"(absent ones: {[k for k, v in enumerate(inputs) if v is None]}) and outputs "
                           f"mask {out_mask}, which the TensorRT plugin's fields cannot express")
    if not masks:
        return
    if out_mask != 1:
        node.attributes["outputs"] = ir.AttrInt64("outputs", out_mask)
    else:
        node.attributes.pop("outputs", None)
    if not gap or "inputs" in node.attributes:
        return  # no gap (the leading slots, by position), or already compacted: left as it is
    present = [(k, v) for k, v in enumerate(inputs) if v is not None]
    for j, (_, v) in enumerate(present):
        node.replace_input_with(j, v)
    node.resize_inputs(len(present))
    node.attributes["inputs"] = ir.AttrInt64("inputs", sum(1 << k for k, _ in present))


def _ir_version(model: ir.Model, report: RewriteReport) -> int:
    """The input's IR version, raised to what its opsets need, capped at what ONNX Runtime reads."""
    need = 3
    for domain, version in model.graph.opset_imports.items():
        if domain in ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.training"):
            try:
                need = max(need, onnx.helper.find_min_ir_version_for(
                    [onnx.helper.make_opsetid(domain, version)], ignore_unknown=True))
            except (ValueError, TypeError):
                need = max(need, model.ir_version)
    out = max(min(model.ir_version, MAX_IR_VERSION), need)
    if out > MAX_IR_VERSION:
        report.notes.append(f"IR version {out} is needed by the model's opsets; ONNX Runtime 1.31 reads "
                            f"up to {MAX_IR_VERSION}")
    return out

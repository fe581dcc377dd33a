"""The rewrite report: every rewrite and every refusal, as text or JSON."""
from __future__ import annotations

import dataclasses
import json
from collections import Counter


@dataclasses.dataclass
class RewriteRecord:
    """One node of ours in the output model and the original nodes it replaced."""

    op: str                 # trt_fastops op type of the new node
    node: str               # its name
    rules: list[str]        # rules that built it, in order ("layer_norm", "skip_layer_norm")
    replaced: list[str]     # names of the original nodes it replaced
    replaced_ops: list[str]  # their op types (same order)
    details: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        nodes = ", ".join(f"{t} '{n}'" for t, n in zip(self.replaced_ops, self.replaced))
        extra = [f"rules {' + '.join(self.rules)}"]
        if self.details.get("sum_output"):
            extra.append("Sum output feeds the residual stream")
        if self.details.get("bias"):
            extra.append("Linear bias folded in")
        if self.details.get("shapes_assumed"):
            extra.append("dynamic X/Skip dims not provably compatible; the op checks them at run time")
        if self.details.get("activation"):
            extra.append(f"{self.details['activation']} folded in")
        if self.details.get("form"):
            extra.append(f"{self.details['form'].upper()} Q/K/V")
        if self.details.get("packed"):
            extra.append(self.details["packed"])
        if self.details.get("causal"):
            extra.append("causal mask -> is_causal=1")
        if self.details.get("gqa"):
            extra.append(self.details["gqa"])
        if self.details.get("repeat_kv"):
            extra.append(self.details["repeat_kv"])
        if self.details.get("mask_shapes_assumed"):
            extra.append("mask dims not provably compatible; the op checks them at run time")
        if self.details.get("fallback"):
            extra.append(f"fallback: {self.details['fallback']}")
        return f"  rewrote  {self.op} '{self.node}' <- {nodes}  ({'; '.join(extra)})"


@dataclasses.dataclass
class RefusalRecord:
    """A pattern that matched structurally but whose check said no."""

    rule: str
    op: str
    nodes: list[str]
    node_ops: list[str]
    reason: str

    def line(self) -> str:
        nodes = ", ".join(f"{t} '{n}'" for t, n in zip(self.node_ops, self.nodes))
        return f"  refused  {self.op} ({self.rule}) at {nodes}: {self.reason}"


@dataclasses.dataclass
class RewriteReport:
    ops: list[str]                               # ops that were requested
    rewrites: list[RewriteRecord] = dataclasses.field(default_factory=list)
    refusals: list[RefusalRecord] = dataclasses.field(default_factory=list)
    ir_version: int | None = None                # of the output model
    opset_imports: dict = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    conv: str = "off"                            # conv policy: off, fallback or all
    target: str = "portable"                     # portable, or ort (ORT contrib ops allowed)

    def counts(self) -> dict[str, int]:
        """Rewrites per new op type, e.g. {"SkipLayerNorm": 5}."""
        return dict(sorted(Counter(r.op for r in self.rewrites).items()))

    def refusal_counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r.rule for r in self.refusals).items()))

    def to_dict(self) -> dict:
        return {
            "ops": list(self.ops),
            "counts": self.counts(),
            "refusal_counts": self.refusal_counts(),
            "rewrites": [dataclasses.asdict(r) for r in self.rewrites],
            "refusals": [dataclasses.asdict(r) for r in self.refusals],
            "ir_version": self.ir_version,
            "opset_imports": dict(self.opset_imports),
            "notes": list(self.notes),
            "conv": self.conv,
            "target": self.target,
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def to_text(self) -> str:
        counts = self.counts()
        summary = ", ".join(f"{op} {n}" for op, n in counts.items()) or "nothing"
        policy = (f"; conv={self.conv}" if self.conv != "off" else "") + (
            f"; target={self.target}" if self.target != "portable" else "")
        lines = [f"trt_fastops rewrite ({', '.join(self.ops)}{policy}): {len(self.rewrites)} rewrites "
                 f"({summary}), {len(self.refusals)} refusals"]
        lines += [r.line() for r in self.rewrites]
        lines += [r.line() for r in self.refusals]
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_text()

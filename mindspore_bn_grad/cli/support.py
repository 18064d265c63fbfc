"""`python -m mindspore_bn_grad support [--soc NAME] [--combinations] [--markdown]`: the support matrix.

Everything printed is derived from op_def/batch_norm_backward_support.yaml
through support_rules.py; it prints plain text, or Markdown with --markdown.
``support_markdown()`` is also what scripts/gen_support_table.py writes to
docs/support_table.md and into the README's marked block, and
``arguments_markdown()`` (the arguments of the three operators, from their
prototypes) what it writes to docs/arguments.md (a test fails when they drift).
"""
import argparse
import sys

from .. import support_rules
from ..spec import BACKWARD_YAML, ELEMT_YAML, REDUCE_YAML, load_opdef

MAX_LISTED = 500


def _row(cells):
    return "| " + " | ".join(cells) + " |"


def _table(header, rows):
    return [_row(header), _row(["---"] * len(header))] + [_row(r) for r in rows]


def _constraint_text(c, relations):
    src = c.by[0] + (f" (or {', '.join(c.by[1:])} when {c.by[0]} is absent)" if len(c.by) > 1 else "")
    if c.relation == support_rules.SAME:
        return f"the dtype of {src}"
    pairs = "; ".join(f"{k} → {', '.join(v)}" for k, v in relations[c.relation].items())
    return f"by {src}: {pairs}"


def summary_lines(socs):
    rows = []
    for soc in socs:
        t = support_rules.target_info(soc)
        rows.append([f"`{t.name}`", t.product_line, ", ".join(t.dtypes), t.rule_summary,
                     ", ".join(t.formats)])
    return _table(["target", "product line", "dtypes (grad_out, input, grad_input)",
                   "per-channel tensors (weight, running_*, save_*, grad_weight, grad_bias)",
                   "formats (grad_out, input, grad_input)"], rows)


def _has_relations(t):
    return any(c.relation != support_rules.SAME for cons in t.rules.values() for c in cons)


def detail_lines(soc):
    """Per grad_out dtype, the dtypes each tensor may have, and the rules behind them."""
    t = support_rules.target_info(soc)
    opdef = load_opdef()
    names = [n for n in opdef.input_names + opdef.output_names if n != "grad_out"]
    combos = support_rules.dtype_combinations(t.name, derived_outputs=False)
    rows = []
    for g in t.dtypes:
        mine = [c for c in combos if c["grad_out"] == g]
        rows.append([g] + [", ".join(d for d in t.dtypes if any(c[n] == d for c in mine)) for n in names])
    support = support_rules.load_support()
    lines = [f"### `{t.name}` ({t.rule_set}): dtypes per grad_out dtype", ""]
    lines += _table(["grad_out"] + names, rows)
    lines += ["", "Each tensor must also meet every rule of its line:", ""]
    for n in names:
        cons = t.rules.get(n, ())
        if cons:
            lines.append(f"- {n}: " + "; and ".join(_constraint_text(c, support.relations) for c in cons))
    return lines


def support_markdown(socs=None) -> str:
    """The support matrix as Markdown (all targets by default)."""
    socs = [support_rules.resolve(s) for s in socs] if socs else support_rules.targets()
    lines = ["<!-- Generated from op_def/batch_norm_backward_support.yaml by "
             "scripts/gen_support_table.py; do not edit by hand. -->", ""]
    lines += summary_lines(socs)
    lines += ["", "input and grad_input always have grad_out's dtype and format. Per-channel "
              "tensors are 1-D. A rule whose source tensor is absent does not apply; "
              "gradients of an absent weight take grad_out's dtype.", ""]
    lines += ["Names accepted by `set_target_soc()` and `MS_BN_GRAD_SOC` (case-insensitive):", ""]
    for soc in socs:
        t = support_rules.target_info(soc)
        lines.append(f"- `{t.name}`" + (f": also {', '.join(t.aliases)}" if t.aliases else ""))
    lines.append("")
    for soc in socs:
        if _has_relations(support_rules.target_info(soc)):
            lines += detail_lines(soc) + [""]
    return "\n".join(lines).rstrip() + "\n"


def _yes(b):
    return "yes" if b else "no"


def _when(cond):
    return ", ".join(f"{k}={v}" for k, v in cond.items()) if cond else "always"


def arguments_markdown() -> str:
    """The arguments of the three operators, from their prototypes (docs/arguments.md)."""
    lines = ["<!-- Generated from op_def/*.yaml by scripts/gen_support_table.py; do not edit by hand. -->", "",
             "# Arguments of the operators", ""]
    for filename in (BACKWARD_YAML, REDUCE_YAML, ELEMT_YAML):
        o = load_opdef(filename)
        lines += [f"## {o.op_name} (`{o.aclnn}`)", "", o.description, "", "Inputs (in call order):", ""]
        rows = []
        for i in o.inputs:
            shape = {"full": f"rank {o.min_rank}..{o.max_rank}", "channel": "(C,)", "counts": "1-D, any length"}
            dtypes = "; ".join(f"{d}: {', '.join(v)}" for d, v in i.dtypes.items()) if i.dtypes else \
                (f"like {i.like}" if i.like else "")
            rows.append([f"`{i.name}`", i.aclnn, _yes(not i.optional), shape[i.shape], _when(i.used_when),
                         "" if i.default_value is None else repr(i.default_value), dtypes])
        lines += _table(["name", "ACLNN name", "required", "shape", "read when", "value when absent",
                         "dtypes"], rows)
        lines += ["", "Attributes (after the tensors):", ""]
        rows = [[f"`{a.name}`", a.type, repr(a.default), a.kernel_attr,
                 ", ".join(a.values) if a.values else ("" if a.min is None else f">= {a.min}")] for a in o.attrs]
        lines += _table(["name", "type", "default", "kernel attribute", "values"], rows)
        lines += ["", "Outputs:", ""]
        mask = (lambda bit: f"{o.mask_attrs[bit]}") if o.mask_attrs else (lambda bit: f"output_mask[{bit}]")
        rows = [[f"`{x.name}`", x.aclnn, "like grad_out" if x.like else "(C,)",
                 " else ".join(x.dtype_from), mask(x.mask_bit) if len(o.outputs) > 1 else "always"]
                for x in o.outputs]
        lines += _table(["name", "ACLNN name", "shape", "dtype of", "computed when"], rows)
        lines.append("")
    o = load_opdef()
    lines += ["Layouts (`data_format`): " + "; ".join(
        f"{n}: channel axis {f.channel_axis}, ranks {', '.join(map(str, f.ranks))}"
        for n, f in o.data_formats.items()) + ".", "",
        "Kernel error codes (the CPU kernel's return values, raised as RuntimeError): "
        + "; ".join(f"{e.code} {e.message}" for e in o.kernel_errors) + ".", ""]
    return "\n".join(lines)


def plain_text(markdown: str) -> str:
    """Markdown of this module as terminal text: no comments, aligned tables, no backticks."""
    out, table = [], []

    def flush():
        if table:
            widths = [max(len(r[k]) for r in table) for k in range(len(table[0]))]
            out.extend("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table)
            table.clear()

    for line in markdown.replace("`", "").splitlines():
        if line.startswith("<!--"):
            continue
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if not all(set(c) <= {"-"} for c in cells):
                table.append(cells)
            continue
        flush()
        out.append(line.lstrip("#").strip() if line.startswith("#") else line)
    flush()
    text = "\n".join(out).strip("\n") + "\n"
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m mindspore_bn_grad support",
                                description="Per-SoC dtype/format support of BatchNormBackward "
                                            "(from op_def/batch_norm_backward_support.yaml).")
    p.add_argument("--soc", action="append", metavar="NAME",
                   help=f"target or alias (repeatable; default: all of {', '.join(support_rules.targets())})")
    p.add_argument("--combinations", action="store_true",
                   help="also list every accepted dtype combination (inputs, then outputs)")
    p.add_argument("--markdown", action="store_true", help="print Markdown (the docs/ form) instead of plain text")
    args = p.parse_args(argv)
    try:
        socs = [support_rules.resolve(s) for s in args.soc] if args.soc else support_rules.targets()
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    out = [support_markdown(socs)]
    if args.combinations:
        opdef = load_opdef()
        names = opdef.input_names + opdef.output_names
        for soc in socs:
            combos = support_rules.dtype_combinations(soc, derived_outputs=False)
            out.append(f"### `{soc}`: {len(combos)} dtype combinations x "
                       f"{len(support_rules.accepted_formats(soc))} formats\n")
            if len(combos) > MAX_LISTED:
                out.append(f"(more than {MAX_LISTED}: not listed)\n")
                continue
            out.append("\n".join(_table(names, [[c[n] for n in names] for c in combos])) + "\n")
    text = "\n".join(out)
    sys.stdout.write(text if args.markdown else plain_text(text))
    return 0

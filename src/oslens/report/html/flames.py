"""Flame graphs of sampled kernel stacks, drawn with the page's own Vega
(inlined, offline): a frame's width is its time per operation, its parent
below it, the causes (a system call, a fault, a lock wait, an interrupt,
user space) at the root. A differential one (Gregg's) takes its widths from
the later point and colours each frame by how its time per operation
changed since the earlier one: red grew, blue shrank.

The layout is computed here from folded stacks ({'a;b;c': ns per op}); the
chart only draws rectangles."""

from __future__ import annotations

from dataclasses import dataclass, field

import altair as alt
import pandas as pd

from ...format import ns as fmt_ns

# Frames narrower than this share of the whole are left out (and said): a
# flame graph of thousands of slivers draws nothing a person can read.
MIN_SHARE = 0.002
ROW_PX = 16


@dataclass
class _Node:
    value: float = 0.0
    before: float = 0.0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(after: dict[str, float], before: dict[str, float] | None) -> _Node:
    root = _Node()
    for which, folded in (("value", after), ("before", before or {})):
        for stack, v in folded.items():
            node = root
            setattr(node, which, getattr(node, which) + v)
            for frame in stack.split(";"):
                node = node.children.setdefault(frame, _Node())
                setattr(node, which, getattr(node, which) + v)
    return root


def _rects(root: _Node, differential: bool) -> tuple[list[dict], int]:
    """Every frame wide enough, as x0, x1 (ns per op from the left), depth;
    and how many were too narrow to draw."""
    rows, hidden = [], 0
    least = MIN_SHARE * root.value

    def walk(node: _Node, name: str, x0: float, depth: int, path: str) -> None:
        nonlocal hidden
        if node.value < least:
            hidden += 1
            return
        row = {"frame": name, "x0": x0, "x1": x0 + node.value, "depth": depth, "ns_per_op": node.value,
               "stack": path}  # fmt: skip
        if differential:
            row["change"] = node.value - node.before
            row["change_text"] = ("+" if row["change"] >= 0 else "−") + fmt_ns(abs(row["change"]))
        rows.append(row)
        x = x0
        for child_name, child in sorted(node.children.items()):
            walk(child, child_name, x, depth + 1, f"{path};{child_name}" if path else child_name)
            x += child.value

    x = 0.0
    for name, child in sorted(root.children.items()):
        walk(child, name, x, 0, name)
        x += child.value
    return rows, hidden


def hidden_note(hidden: int) -> str:
    """What a caption adds when chart() left frames out."""
    return f"; {hidden} frames under {MIN_SHARE:.1%} of the width are not drawn" if hidden else ""


def chart(after: dict[str, float], before: dict[str, float] | None = None, width: int = 860):
    """The flame graph of `after` (folded stacks, ns per op); differential
    against `before` when given. None when there is nothing to draw; else
    (chart, frames left out as too narrow)."""
    root = _tree(after, before)
    if root.value <= 0:
        return None
    rows, hidden = _rects(root, before is not None)
    df = pd.DataFrame(rows)
    depth = int(df.depth.max()) + 1
    y = alt.Y("depth:O", axis=None, sort="descending", scale=alt.Scale(paddingInner=0.05))
    tips = [alt.Tooltip("stack:N", title="stack"), alt.Tooltip("ns_per_op:Q", title="ns per op", format=",.1f")]
    if before is not None:
        worst = max(abs(df.change).max(), 1e-9)
        colour = alt.Color(
            "change:Q",
            title="change, ns per op",
            scale=alt.Scale(scheme="redblue", reverse=True, domain=[-worst, worst]),
        )
        tips.append(alt.Tooltip("change_text:N", title="change"))
    else:
        colour = alt.Color("frame:N", legend=None, scale=alt.Scale(scheme="oranges"))
    base = alt.Chart(df).encode(alt.X("x0:Q", axis=None, scale=alt.Scale(domain=[0, root.value])), y)
    bars = base.mark_rect(stroke="white", strokeWidth=0.5).encode(x2="x1:Q", color=colour, tooltip=tips)
    labels = (
        base.transform_calculate(mid="(datum.x0 + datum.x1) / 2", room=f"(datum.x1 - datum.x0) / {root.value}")
        .transform_filter(f"datum.room * {width} > 40")
        .mark_text(align="center", baseline="middle", fontSize=10, clip=True)
        .encode(alt.X("mid:Q"), text="frame:N")
    )
    layered = alt.layer(bars, labels).properties(width=width, height=ROW_PX * depth)
    return layered, hidden

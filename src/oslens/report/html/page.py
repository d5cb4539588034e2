"""One self-contained HTML report: blocks (figures, tables, notes) in
sections, the plots drawn in the browser by Vega-Lite from specs that
Altair made, with Vega, Vega-Lite and vega-embed inlined (vl-convert ships
the bundle), so the file opens offline and fetches nothing.

Every string that came from a machine or a user (host names, command
lines, process names, lock symbols) reaches the page through html.escape,
or as JSON data inside a <script type="application/json"> block whose
'<' are escaped, so none of it can become markup or script."""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt

from ... import runtime
from ...format import value

# Thousands of points in one plot (a noise run's detours) are drawn, not refused.
alt.data_transformers.disable_max_rows()


@dataclass
class Figure:
    id: str
    title: str
    chart: alt.TopLevelMixin
    caption: str = ""
    # drawn only when its reader opens it: a figure per point that few want
    # (a flame graph of each) costs nothing on the page until then
    on_demand: bool = False

    def spec(self) -> dict:
        return self.chart.to_dict()


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list]
    caption: str = ""


@dataclass
class Note:
    text: str
    warning: bool = False


Block = Figure | Table | Note


@dataclass
class Section:
    title: str
    blocks: list[Block] = field(default_factory=list)


@functools.lru_cache(maxsize=1)
def _vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one ES module, with our start-up
    code: embed every spec of the page into its element."""
    import vl_convert as vlc

    snippet = """
const specs = JSON.parse(document.getElementById('oslens-specs').textContent);
const options = {actions: {export: true, source: false, compiled: false, editor: false}, renderer: 'svg'};
const later = Array.from(document.querySelectorAll('details[data-plot]'));
const onDemand = new Set(later.map(d => d.dataset.plot));
const pending = Object.entries(specs).filter(([id]) => !onDemand.has(id))
  .map(([id, spec]) => vegaEmbed('#' + id, spec, options));
for (const d of later) {
  d.addEventListener('toggle', () => {
    if (!d.open || d.dataset.drawn) return;
    d.dataset.drawn = 'pending';
    vegaEmbed('#' + d.dataset.plot, specs[d.dataset.plot], options).then(
      () => { d.dataset.drawn = 'yes'; }, (e) => { d.dataset.drawn = 'error'; console.error(e); });
  });
}
Promise.all(pending).then(() => { document.body.dataset.plotsReady = String(pending.length); },
                          (e) => { document.body.dataset.plotsError = String(e); console.error(e); });
"""
    key = hashlib.sha256(f"{vlc.__version__}\0{snippet}".encode()).hexdigest()[:16]
    cached = _cache_dir()
    path = cached / f"vega-bundle-{key}.js" if cached else None
    if path and _ours(path):
        return path.read_text()
    bundle = vlc.javascript_bundle(snippet)  # about 2 s: the libraries bundled afresh
    if path:
        _keep(path, bundle)
    return bundle


def _keep(path: Path, text: str) -> None:
    """Writes path whole or not at all (a reader never sees half a file);
    a full or read-only home leaves it unwritten, and the page is made all the same."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vega-")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def _cache_dir() -> Path | None:
    """This user's oslens cache ($XDG_CACHE_HOME/oslens or ~/.cache/oslens),
    made private; None where it cannot be. What is cached there goes into
    pages as a script, so only a directory no one else can write is used."""
    try:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        base.mkdir(parents=True, exist_ok=True)
    except (OSError, RuntimeError):  # RuntimeError: no home to find
        return None
    d = base / "oslens"
    return d if runtime.usable_dir(d, private=True) else None


def _ours(path: Path) -> bool:
    """path is a file of this user's that no one else can write."""
    try:
        st = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _script_json(obj) -> str:
    """JSON safe inside a <script> element: no '</script>', no '<!--'."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


def _cell(v) -> str:
    return html.escape(value(v))


CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1200px;
padding:0 1em;color:#222}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em;margin:1.4em 0 .3em}
table{border-collapse:collapse;margin:.5em 0 1em;font-variant-numeric:tabular-nums}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:right} th{background:#f4f4f4}
td:first-child,th:first-child,td.text{text-align:left}
.note{color:#555} .warning{color:#8a4b00;background:#fff6e5;padding:.3em .6em;border-left:3px solid #e0a030}
.caption{color:#666;font-size:.92em;margin:.2em 0 1em} .figure{margin:1em 0}
code{background:#f4f4f4;padding:0 .2em}
"""


def file_name(figure_id: str) -> str:
    """A figure's id as a file's name: ids carry stored names (a probe's,
    a variant's), which an imported store may have chosen, so nothing in it
    may lead out of the directory (a '/', a leading '.')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", figure_id).lstrip(".") or "figure"


@dataclass
class Page:
    title: str
    subtitle: str = ""
    sections: list[Section] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]

    def to_html(self) -> str:
        specs = {f.id: f.spec() for f in self.figures()}
        parts = [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            f"<title>{html.escape(self.title)}</title><style>{CSS}</style></head><body>",
            f"<h1>{html.escape(self.title)}</h1>",
        ]
        if self.subtitle:
            parts.append(f"<p class='note'>{html.escape(self.subtitle)}</p>")
        for s in self.sections:
            parts.append(f"<h2>{html.escape(s.title)}</h2>")
            parts += [self._block(b) for b in s.blocks]
        parts.append(f"<script type='application/json' id='oslens-specs'>{_script_json(specs)}</script>")
        if specs:
            parts.append(f"<script type='module'>{_vega_bundle()}</script>")
        else:  # nothing to draw: the page is ready as it is (a reader waiting for the plots is told so)
            parts.append("<script>document.body.dataset.plotsReady = '0';</script>")
        parts.append("</body></html>")
        return "\n".join(parts)

    @staticmethod
    def _block(b: Block) -> str:
        if isinstance(b, Note):
            return f"<p class='{'warning' if b.warning else 'note'}'>{html.escape(b.text)}</p>"
        if isinstance(b, Table):
            head = "".join(f"<th>{html.escape(c)}</th>" for c in b.columns)
            body = "".join(
                "<tr>"
                + "".join(
                    f"<td class='text'>{_cell(v)}</td>" if isinstance(v, str) else f"<td>{_cell(v)}</td>" for v in row
                )
                + "</tr>"
                for row in b.rows
            )
            cap = f"<p class='caption'>{html.escape(b.caption)}</p>" if b.caption else ""
            return f"<h3>{html.escape(b.title)}</h3><table><tr>{head}</tr>{body}</table>{cap}"
        cap = f"<p class='caption'>{html.escape(b.caption)}</p>" if b.caption else ""
        if b.on_demand:
            return (
                f"<details class='figure' data-plot='{html.escape(b.id)}'><summary>{html.escape(b.title)}</summary>"
                f"<div id='{html.escape(b.id)}' class='plot-on-demand' data-title='{html.escape(b.title)}'></div>"
                f"{cap}</details>"
            )
        return (
            f"<div class='figure'><h3>{html.escape(b.title)}</h3>"
            f"<div id='{html.escape(b.id)}' class='plot' data-title='{html.escape(b.title)}'></div>{cap}</div>"
        )

    def write_static(self, directory: Path, fmt: str) -> list[Path]:
        """Every figure as its own PNG or SVG file, for papers: the same
        specs, rendered by vl-convert without a browser."""
        import vl_convert as vlc

        directory.mkdir(parents=True, exist_ok=True)
        out = []
        taken: set[str] = set()
        for f in self.figures():
            name = file_name(f.id)
            name = next(n for n in (name, *(f"{name}-{k}" for k in range(2, 10**6))) if n not in taken)
            taken.add(name)
            path = directory / f"{name}.{fmt}"
            if fmt == "svg":
                path.write_text(vlc.vegalite_to_svg(f.spec()))
            else:
                path.write_bytes(vlc.vegalite_to_png(f.spec(), scale=2))
            out.append(path)
        return out

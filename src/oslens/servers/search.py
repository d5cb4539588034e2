"""xapian-tcpsrv serving a Xapian index to search clients (web search: the
search backend of CloudSuite's web search, a Nutch index server), the
distribution's packages: xapian-tools for the server, python3-xapian for
the clients (xapian_search.py, run by the system's Python).

The index is built from the machine's own text before the server starts
(once per oslens process: every repetition serves the same index), and
described in the run's configuration (`search.conf`): its documents,
terms and size. The server forks a process per connection, as the
clients hold one each; the clients count the queries answered."""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
from pathlib import Path

from .. import runtime
from ..errors import MeasurementError
from . import Load, Server, made_once

PORT = 7700
DOCS = 50_000  # paragraphs indexed: seconds to build, tens of MB served from the page cache
SYSTEM_PYTHON = "/usr/bin/python3"  # where Debian's python3-xapian is importable
SCRIPT = str(Path(__file__).with_name("xapian_search.py"))
# isolated (-I): the script's own directory, this package's, is not on its
# path (a module here must never shadow the Xapian it imports), nor are the
# user's site-packages
SCRIPT_ARGV = (SYSTEM_PYTHON, "-I", SCRIPT)
INDEX_TIMEOUT_S = 600


def _unavailable() -> str | None:
    """Why the clients cannot run here, or None."""
    try:
        p = subprocess.run([SYSTEM_PYTHON, "-I", "-c", "import xapian"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{SYSTEM_PYTHON} cannot run ({e})"
    return None if p.returncode == 0 else f"{SYSTEM_PYTHON} has no Xapian module (Debian package python3-xapian)"


def _index(tmp: str, docs: int) -> tuple[str, str]:
    """(the index's directory, what it holds as JSON), built once under
    oslens's private temporary directory `tmp`, removed with it."""
    dbdir = str(Path(tempfile.mkdtemp(prefix="oslens.search-index.", dir=tmp)) / "db")
    try:
        p = subprocess.run([*SCRIPT_ARGV, "index", dbdir, "--docs", str(docs)], capture_output=True,
                           text=True, timeout=INDEX_TIMEOUT_S,
                           preexec_fn=runtime.dies_with_parent(signal.SIGTERM))  # fmt: skip
    except subprocess.TimeoutExpired:
        raise MeasurementError(f"indexing {docs:,} documents took over {INDEX_TIMEOUT_S} s") from None
    if p.returncode != 0:
        raise MeasurementError(f"the index could not be built: {(p.stderr or p.stdout).strip()[-300:]}")
    return dbdir, p.stdout.strip()


def _server(workdir: Path, threads: int) -> list[str]:
    dbdir, held = made_once(_index, DOCS)
    (workdir / "search.conf").write_text(f"index {dbdir}\n{held}\n")
    return ["xapian-tcpsrv", "--port", str(PORT), "--interface", "127.0.0.1", "--quiet", dbdir]


def _drive(seconds: float, connections: int, threads: int) -> list[str]:
    vocabulary = json.loads(made_once(_index, DOCS)[1])["vocabulary"]  # where the indexer wrote it
    return [*SCRIPT_ARGV, "query", "--port", str(PORT), "--vocabulary", vocabulary, "--clients", str(connections),
            "--seconds", f"{seconds:g}"]  # fmt: skip


def read(out: str) -> Load:
    """The clients' summary: the last line of their output, one JSON object."""
    lines = [ln for ln in out.strip().splitlines() if ln.startswith("{")]
    try:
        s = json.loads(lines[-1])
        requests, seconds = int(s["requests"]), float(s["seconds"])
    except (IndexError, ValueError, KeyError, TypeError):
        return Load(None, None, None, None, unread="the search clients printed no summary: "
                    + (out.strip()[-200:] or "nothing"))  # fmt: skip
    notes = []
    if failed := int(s.get("failed_clients") or 0):
        notes.append(f"{failed} client(s) failed (among the errors)")
    if stopped := int(s.get("stopped_in_a_query") or 0):
        notes.append(f"{stopped} client(s) still inside a query at the stop, killed: that query is not counted")
    return Load(requests, int(s.get("errors", 0)), seconds, requests / seconds if seconds else None,
                dict(s.get("latency_ms") or {}), counted_by="the search clients", notes=notes)  # fmt: skip


SEARCH = Server(
    name="search",
    what=f"web search: xapian-tcpsrv answering ranked queries of one to three terms over an index of {DOCS:,} "
    "paragraphs of this machine's text, each client on a connection of its own",
    stands_for="search backend",
    server_package="xapian-tools",
    client_package="python3-xapian",
    server_exe="xapian-tcpsrv",
    client_exe=SYSTEM_PYTHON,
    port=PORT,
    version_argv=("xapian-tcpsrv", "--version"),
    client_version_argv=(SYSTEM_PYTHON, "-I", "-c", "import xapian; print(xapian.version_string())"),
    configure=_server,
    drive=_drive,
    read=read,
    unavailable=_unavailable,
    limits="an index of tens of MB served from memory, not CloudSuite's 17 GB Nutch index; no search frontend "
    "(the clients query the backend directly)",
)

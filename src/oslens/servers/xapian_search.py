"""Web search's two halves beside xapian-tcpsrv, run by the system's Python
(Debian's python3-xapian binds the library for it alone), so this file
imports nothing of oslens and nothing beyond the standard library and
Xapian:

    index DBDIR --docs N      builds the index the server serves: N
                              documents, each a paragraph of the text the
                              machine holds (Debian's changelogs and
                              copyright files, the licences, the Python
                              library's sources), indexed by Xapian with
                              English stemming and positions, and beside it
                              the vocabulary queries are drawn from (its
                              most frequent words); prints what it indexed,
                              and where the vocabulary is, as one JSON line
    query --port P --vocabulary FILE --clients C --seconds S
                              the load: C client processes, each with its
                              own connection to the server (a search
                              backend, as the search frontend of
                              CloudSuite holds one), each issuing queries
                              back to back — one to three terms drawn from
                              the index's vocabulary by frequency, the top
                              ten documents ranked (BM25) and their text
                              fetched — until S seconds pass or SIGINT;
                              then one JSON line: queries answered, errors,
                              seconds, latency percentiles (ms)

The queries a client issues are fixed by its number: runs repeat."""

from __future__ import annotations

import argparse
import array
import bisect
import ctypes
import gzip
import itertools
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

import xapian

SOURCES = (
    ("/usr/share/doc", "*/changelog*.gz"),
    ("/usr/share/doc", "*/copyright"),
    ("/usr/share/common-licenses", "*"),
    (os.path.dirname(os.__file__), "**/*.py"),  # the Python library's sources: always there
)
MIN_PARAGRAPH = 40  # characters: shorter ones (a date, a signature) are not documents
SNIPPET = 300  # characters of a document's text kept as its data, what a result page shows
VOCABULARY = 2000  # the most frequent terms queries are drawn from
ZIPF = 1.0  # a term's weight: 1 / rank**ZIPF, as words in queries are
TOP = 10  # documents ranked and fetched per query
TIMEOUT_MS = 10_000
FLUSH_S = 0.2  # how often a client appends its latencies to its file
ERROR = -1  # a failed query, among the latencies
STOP_GRACE_S = 2.0  # a stopped client's time to finish its query and write its count (oslens waits 5 s for all)
PR_SET_PDEATHSIG = 1


def _paragraphs():
    """The machine's text, a paragraph at a time, in a fixed order."""
    for root, pattern in SOURCES:
        for path in sorted(Path(root).glob(pattern)):
            try:
                data = gzip.open(path).read() if path.suffix == ".gz" else path.read_bytes()
            except (OSError, EOFError):
                continue
            for para in data.decode("utf-8", "replace").split("\n\n"):
                if len(para.strip()) >= MIN_PARAGRAPH:
                    yield para


def index(dbdir: str, docs: int) -> dict:
    """`docs` documents; where the machine holds fewer paragraphs, they are
    indexed again under new document numbers (said in `distinct`)."""
    db = xapian.WritableDatabase(dbdir, xapian.DB_CREATE_OR_OVERWRITE)
    tg = xapian.TermGenerator()
    tg.set_stemmer(xapian.Stem("english"))
    distinct, text_bytes = 0, 0
    paragraphs = _paragraphs()
    seen: list[str] = []
    for n in range(docs):
        para = next(paragraphs, None)
        if para is None:
            if not seen:
                raise SystemExit("no text on this machine to index")
            para = seen[n % len(seen)]
        else:
            distinct += 1
            if len(seen) < docs:
                seen.append(para)
        doc = xapian.Document()
        doc.set_data(para[:SNIPPET])
        tg.set_document(doc)
        tg.index_text(para)
        db.add_document(doc)
        text_bytes += len(para)
    db.commit()
    with open(vocabulary_file(dbdir), "w") as f:
        f.writelines(f"{w}\n" for w in _vocabulary(db))
    out = {"docs": db.get_doccount(), "distinct": distinct, "terms": sum(1 for _ in db.allterms()),
           "text_bytes": text_bytes, "index_bytes": sum(p.stat().st_size for p in Path(dbdir).iterdir()),
           "vocabulary": vocabulary_file(dbdir)}  # fmt: skip
    db.close()
    return out


def vocabulary_file(dbdir: str) -> str:
    """Beside the index, not in it: xapian-tcpsrv serves the directory as a database."""
    return str(Path(dbdir).parent / "vocabulary")


def _vocabulary(db) -> list[str]:
    """The most frequent unprefixed terms (stemmed ones carry a 'Z'), most frequent first."""
    terms = sorted(
        ((t.termfreq, t.term) for t in db.allterms() if t.term[:1].islower() and t.term.isalpha()),
        reverse=True,
    )[:VOCABULARY]
    return [t.decode() for _, t in terms]


def _weighted(path: str) -> tuple[list[str], list[float]]:
    """The vocabulary with its cumulative Zipf weights by rank."""
    words = Path(path).read_text().split()
    return words, list(itertools.accumulate(1.0 / (r + 1) ** ZIPF for r in range(len(words))))


def _client(number: int, port: int, vocabulary, deadline: float, out: str, stop: list) -> None:
    """Queries back to back on one connection, each one's latency in ns
    (ERROR for a failed one) appended to the file `out` every FLUSH_S: a
    client killed in a call that does not return (see _stop_clients) has
    its count up to its last flush there."""
    rng = random.Random(number)
    words, weights = vocabulary
    pending = array.array("q")
    flushed = time.monotonic()
    with open(out, "ab", buffering=0) as f:
        db = xapian.remote_open("127.0.0.1", port, TIMEOUT_MS)
        enquire = xapian.Enquire(db)
        while not stop and time.monotonic() < deadline:
            terms = [words[bisect.bisect(weights, rng.random() * weights[-1])] for _ in range(rng.randint(1, 3))]
            t0 = time.perf_counter_ns()
            try:
                enquire.set_query(xapian.Query(xapian.Query.OP_OR, terms))
                for m in enquire.get_mset(0, TOP):
                    m.document.get_data()
                pending.append(time.perf_counter_ns() - t0)
            except xapian.Error:
                pending.append(ERROR)
            if time.monotonic() - flushed > FLUSH_S:
                f.write(pending.tobytes())
                pending, flushed = array.array("q"), time.monotonic()
        f.write(pending.tobytes())


def _stop_clients(children: list[int]) -> tuple[int, int]:
    """Asks every client to stop (each ends its query under way and flushes
    what it counted), gives them STOP_GRACE_S, and kills those still in a
    call that does not return (a query the server has not answered), so that
    the parent answers within the time its own stop is given. Returns (the
    clients that failed, those killed); a killed one's queries up to its last
    flush still count."""
    for pid in children:
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            pass
    failed, left, deadline = 0, set(children), time.monotonic() + STOP_GRACE_S
    while left and time.monotonic() < deadline:
        for pid in list(left):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                left.discard(pid)
                failed += status != 0
        time.sleep(0.01)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    return failed, len(left)


def query(port: int, vocabulary_path: str, clients: int, seconds: float) -> dict:
    stop: list = []
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    started = time.monotonic()
    deadline = started + seconds
    vocabulary = _weighted(vocabulary_path)
    results = tempfile.mkdtemp(prefix="oslens-search-clients.")
    children = []
    parent = os.getpid()
    try:
        for number in range(clients):
            pid = os.fork()
            if pid == 0:
                # a client ends with its parent, however the parent ends (SIGKILL too)
                ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
                if os.getppid() != parent:
                    os._exit(1)
                code = 0
                try:
                    _client(number, port, vocabulary, deadline, f"{results}/{number}", stop)
                except BaseException as e:  # a client that cannot connect: its parent reports it
                    print(f"client {number}: {e}", file=sys.stderr)
                    code = 1
                os._exit(code)
            children.append(pid)
        while not stop and time.monotonic() < deadline:
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        failed, killed = _stop_clients(children)
        answered, errors = array.array("q"), 0
        for number in range(clients):
            try:
                data = Path(f"{results}/{number}").read_bytes()
            except OSError:
                continue  # a client that never connected (counted as failed)
            told = array.array("q", data[: len(data) // 8 * 8])
            errors += told.count(ERROR)
            answered.extend(x for x in told if x != ERROR)
    finally:
        shutil.rmtree(results, ignore_errors=True)
    ms = sorted(x / 1e6 for x in answered)
    pct = {f"p{q}": ms[min(len(ms) - 1, int(len(ms) * q / 100))] for q in (50, 90, 99)} if ms else {}
    return {"requests": len(ms), "errors": errors + failed, "failed_clients": failed, "stopped_in_a_query": killed,
            "seconds": elapsed, "latency_ms": pct}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    i = sub.add_parser("index")
    i.add_argument("dbdir")
    i.add_argument("--docs", type=int, required=True)
    q = sub.add_parser("query")
    q.add_argument("--port", type=int, required=True)
    q.add_argument("--vocabulary", required=True)
    q.add_argument("--clients", type=int, required=True)
    q.add_argument("--seconds", type=float, required=True)
    a = p.parse_args()
    out = index(a.dbdir, a.docs) if a.what == "index" else query(a.port, a.vocabulary, a.clients, a.seconds)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()

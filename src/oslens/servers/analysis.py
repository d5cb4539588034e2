"""Data analysis: a MapReduce word count by the distribution's own tools —
tr splits a text into words (the map), GNU sort orders them on every CPU
(--parallel: the shuffle, spilling to files as it must), uniq counts each
word's run (the reduce). It stands for the data analysis of Zheng et al.
(Hadoop's naive Bayes over Wikipedia, whose training is word counting per
class), and like hpcc it is a job: run to its end, profiled whole.

The text is generated before the job starts (once per oslens process),
words of a Zipf-like vocabulary, as PHOENIX's word count generates its
own; the counts the job writes must add up to the words written, or the
run is an error."""

from __future__ import annotations

import functools
import itertools
import random
import shlex
import tempfile
from pathlib import Path

from . import Load, Server

TEXT_BYTES = 64 << 20  # seconds of sorting on a few CPUs; sort spills past its buffer, as a shuffle does
VOCABULARY = 100_000
WORDS_PER_LINE = 12
BLOCKS, BLOCK_WORDS = 16, WORDS_PER_LINE * 12_000  # about 1 MiB each
SEED = 0x776F7264
LETTERS = "etaoinshrdlcumwfgypbvkjxqz"  # English's order: frequent words come out short and common-looking


def _word(rank: int) -> str:
    """The rank-th word of the vocabulary, in letters only (what tr keeps)."""
    out = ""
    rank += 1
    while rank:
        rank, r = divmod(rank - 1, len(LETTERS))
        out += LETTERS[r]
    return out


@functools.cache
def _text(tmp: str, nbytes: int) -> tuple[str, int]:
    """(the text's path, its words), written once under oslens's private
    temporary directory: BLOCKS blocks of text drawn from the vocabulary,
    then laid end to end in an order drawn too (drawing every word of tens
    of MB would take longer than the job)."""
    words = [_word(r) for r in range(VOCABULARY)]
    weights = list(itertools.accumulate(1.0 / (r + 1) for r in range(VOCABULARY)))
    rng = random.Random(SEED)
    blocks = []
    for _ in range(BLOCKS):
        drawn = rng.choices(words, cum_weights=weights, k=BLOCK_WORDS)
        text = "\n".join(" ".join(drawn[i : i + WORDS_PER_LINE]) for i in range(0, BLOCK_WORDS, WORDS_PER_LINE))
        blocks.append((text + "\n").encode())
    path = Path(tempfile.mkdtemp(prefix="oslens.analysis-text.", dir=tmp)) / "text"
    written = count = 0
    with open(path, "wb") as f:
        while written < nbytes:
            written += f.write(rng.choice(blocks))
            count += BLOCK_WORDS
    return str(path), count


def _job(workdir: Path, cpus: int) -> list[str]:
    tmp = tempfile.gettempdir()
    text, words = _text(tmp, TEXT_BYTES)
    if not Path(text).is_file():  # the private directory was made anew since (a new run in this process)
        _text.cache_clear()
        text, words = _text(tmp, TEXT_BYTES)
    (workdir / "analysis.conf").write_text(f"text {text}\nbytes {Path(text).stat().st_size}\nwords {words}\n")
    pipeline = (f"tr -cs A-Za-z '\\n' < {shlex.quote(text)} | sort --parallel={cpus} -T {shlex.quote(str(workdir))} "
                f"| uniq -c > {shlex.quote(str(workdir / 'counts'))}")  # fmt: skip
    return ["sh", "-c", f"export LC_ALL=C; {pipeline}"]  # bytes, not a locale's collation


def results(workdir: Path, seconds: float) -> tuple[Load, dict]:
    """The words counted against the words written, and the distinct words."""
    conf = dict(line.split(" ", 1) for line in (workdir / "analysis.conf").read_text().splitlines())
    written = int(conf["words"])
    try:
        with open(workdir / "counts") as f:
            counts = [int(line.split()[0]) for line in f if line.strip()]
    except (OSError, ValueError, IndexError):
        return Load(None, None, seconds, None, unread="the job wrote no counts"), {}
    found = {"words": float(sum(counts)), "distinct_words": float(len(counts)), "words_written": float(written)}
    ok = sum(counts) == written
    return Load(1, 0 if ok else 1, seconds, None, counted_by="the job's counts against the words written"), found


ANALYSIS = Server(
    name="analysis",
    what=f"data analysis: a word count of {TEXT_BYTES >> 20} MiB of generated text by tr, GNU sort on every CPU and "
    "uniq (map, shuffle, reduce), profiled from start to end",
    stands_for="data analysis (bayes)",
    server_package="coreutils",
    client_package="coreutils",
    server_exe="sort",
    client_exe="sh",
    port=0,
    version_argv=("sort", "--version"),
    client_version_argv=(),
    configure=_job,
    job=True,
    time_limit_s=600.0,
    processes=lambda cpus: {"tr": 1, "sort": 1, "uniq": 1},
    results=results,
    result_labels=(("words", "words counted"), ("words_written", "words written"), ("distinct_words", "distinct")),
    limits="one node's word count by Unix tools, not Hadoop's JVM, HDFS and network shuffle, nor Mahout's Bayes",
)

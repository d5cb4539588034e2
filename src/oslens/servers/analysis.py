"""Data analysis: a MapReduce word count by the distribution's own tools.
The text is cut at line boundaries into a part per CPU (as a MapReduce job
splits its input); each part is mapped by its own tr (the words) and sort
(the map side's sort), all at once; then sort -m merges the sorted parts
(the shuffle) and uniq counts each word's run (the reduce). It stands for
the data analysis of Zheng et al. (Hadoop's naive Bayes over Wikipedia,
whose training is word counting per class), and like hpcc it is a job: run
to its end, profiled whole.

The text is generated before the job starts (once per oslens process),
words of a Zipf-like vocabulary, as PHOENIX's word count generates its
own, and cut before each run; the counts the job writes must add up to the
words written, or the run is an error."""

from __future__ import annotations

import itertools
import random
import shlex
import tempfile
from pathlib import Path

from . import Load, Server, made_once

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


def _split(text: str, parts: int, workdir: Path) -> None:
    """The text cut into `parts` files of about equal size at line boundaries (untimed)."""
    data = Path(text).read_bytes()
    start = 0
    for i in range(parts):
        end = len(data) if i == parts - 1 else data.find(b"\n", len(data) * (i + 1) // parts) + 1 or len(data)
        (workdir / f"part.{i:05d}").write_bytes(data[start:end])
        start = end


def _job(workdir: Path, cpus: int) -> list[str]:
    text, words = made_once(_text, TEXT_BYTES)
    _split(text, cpus, workdir)
    (workdir / "analysis.conf").write_text(
        f"text {text}\nbytes {Path(text).stat().st_size}\nwords {words}\nparts {cpus}\n"
    )
    parts, counts = shlex.quote(str(workdir / "part.")), shlex.quote(str(workdir / "counts"))
    script = (
        "export LC_ALL=C\n"  # bytes, not a locale's collation
        f'for p in {parts}*; do tr -cs A-Za-z \'\\n\' < "$p" | sort --parallel=1 -o "$p.sorted" & done\n'  # map
        "wait\n"
        f"sort -m {parts}*.sorted | uniq -c > {counts}\n"  # shuffle, reduce
    )
    return ["sh", "-c", script]


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
    what=f"data analysis: a word count of {TEXT_BYTES >> 20} MiB of generated text, a part per CPU mapped by tr and "
    "GNU sort, merged by sort -m and counted by uniq (map, shuffle, reduce), profiled from start to end",
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
    results=results,
    result_labels=(("words", "words counted"), ("words_written", "words written"), ("distinct_words", "distinct")),
    limits="one node's word count by Unix tools, not Hadoop's JVM, HDFS and network shuffle, nor Mahout's Bayes",
)

"""nginx driven by wrk: web serving (a static page, as many times as the
clients ask) and media streaming (large files, each connection held to a
rate as a player reads a stream), the distribution's packages both."""

from __future__ import annotations

import math
import re
import resource
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

from . import Load, Server, duration_ms

PORT = 8080
PAGE_BYTES = 16 * 1024  # a page with its inline assets, served whole
# A stream is served as segments (as HLS and DASH serve it): 1 MiB, each
# connection held to 2 MB/s, a player's pace rather than a download's.
VIDEO_BYTES = 1024 * 1024
VIDEOS = 4
STREAM_RATE = "2m"  # bytes/s per connection (nginx's limit_rate)


def _open_files() -> int:
    """What a worker may hold open: the limit nginx inherits (it cannot raise it where root lacks
    CAP_SYS_RESOURCE), so that it never promises connections it could not open."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 65535 if soft == resource.RLIM_INFINITY else min(soft, 65535)


def _conf(workdir: Path, workers: int, server_block: str) -> list[str]:
    """nginx in the foreground with everything under workdir: its pid,
    logs and temporary files (none in /var), workers as root (workdir is
    private to oslens), no access log (its writes would be the profile)."""
    tmp = workdir / "tmp"
    tmp.mkdir(exist_ok=True)
    conf = workdir / "nginx.conf"
    temps = "".join(f"    {k}_temp_path {tmp}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    conf.write_text(
        f"user root;\ndaemon off;\nmaster_process on;\nworker_processes {workers};\n"
        f"pid {workdir}/nginx.pid;\nerror_log {workdir}/error.log warn;\n"
        f"events {{ worker_connections {_open_files()}; }}\n"
        "http {\n    access_log off;\n    sendfile on;\n    tcp_nopush on;\n    keepalive_requests 1000000;\n"
        f"{temps}"
        f"    server {{\n        listen 127.0.0.1:{PORT};\n{server_block}"
        "        location = /status { stub_status; }\n    }\n}\n"
    )
    return ["nginx", "-e", str(workdir / "error.log"), "-p", str(workdir), "-c", str(conf)]


def _web(workdir: Path, workers: int) -> list[str]:
    www = workdir / "www"
    www.mkdir(exist_ok=True)
    (www / "index.html").write_bytes(b"<p>oslens</p>\n".ljust(PAGE_BYTES, b" "))
    return _conf(workdir, workers, f"        root {www};\n")


def _streaming(workdir: Path, workers: int) -> list[str]:
    media = workdir / "media"
    media.mkdir(exist_ok=True)
    for i in range(VIDEOS):
        with open(media / f"video{i}.mp4", "wb") as f:  # written, not sparse: served from the page cache
            f.write(bytes(range(256)) * (VIDEO_BYTES // 256))
    return _conf(workdir, workers, f"        root {media};\n        limit_rate {STREAM_RATE};\n")


def _wrk(path: str) -> Callable[[float, int, int], list[str]]:
    def drive(seconds: float, connections: int, threads: int) -> list[str]:
        return ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{max(1, math.ceil(seconds))}s",
                "--latency", f"http://127.0.0.1:{PORT}{path}"]  # fmt: skip

    return drive


_REQUESTS = re.compile(r"^\s*(\d+) requests in ([\d.]+\w+),", re.M)
_SOCKET = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_PERCENTILE = re.compile(r"^\s*(50|75|90|99)(?:\.0+)?%\s+([\d.]+\w+)\s*$", re.M)


def read_wrk(out: str) -> Load:
    """wrk's summary: requests in its run, socket errors and non-2xx replies, latency percentiles."""
    m = _REQUESTS.search(out)
    if not m:
        return Load(None, None, None, None, unread="wrk printed no summary: " + (out.strip()[-200:] or "nothing"))
    requests, seconds = int(m.group(1)), (duration_ms(m.group(2)) or 0) / 1e3
    errors = sum(map(int, _SOCKET.search(out).groups())) if _SOCKET.search(out) else 0
    errors += int(_NON_2XX.search(out).group(1)) if _NON_2XX.search(out) else 0
    latency = {f"p{p}": ms for p, t in _PERCENTILE.findall(out) if (ms := duration_ms(t)) is not None}
    return Load(requests, errors, seconds or None, requests / seconds if seconds else None, latency)


# nginx's own count (stub_status), read in its namespace by the Python running oslens: no curl needed.
STATUS = (sys.executable, "-c", "import urllib.request as u; "
          f"print(u.urlopen('http://127.0.0.1:{PORT}/status', timeout=5).read().decode())")  # fmt: skip
_STATUS = re.compile(r"server accepts handled requests\s+(\d+)\s+(\d+)\s+(\d+)")


def count(before: str, after: str, seconds: float) -> Load:
    """Requests nginx handled between two stub_status readings (the second
    reading is itself a request, counted in it), and the connections it
    accepted but did not handle (dropped: over its limits)."""
    a, b = _STATUS.search(before), _STATUS.search(after)
    if not a or not b:
        return Load(None, None, None, None, unread="nginx's stub_status could not be read")
    requests = int(b.group(3)) - int(a.group(3)) - 1
    dropped = (int(b.group(1)) - int(b.group(2))) - (int(a.group(1)) - int(a.group(2)))
    return Load(requests, dropped, seconds, requests / seconds if seconds else None,
                counted_by="nginx (stub_status, before and after the load)")  # fmt: skip


WEB = Server(
    name="nginx",
    what="web serving: nginx serving a 16 KiB page to wrk's connections",
    stands_for="web serving",
    server_package="nginx",
    client_package="wrk",
    server_exe="nginx",
    client_exe="wrk",
    port=PORT,
    version_argv=("nginx", "-v"),
    client_version_argv=("wrk", "-v"),
    configure=_web,
    drive=_wrk("/index.html"),
    read=read_wrk,
    counters=STATUS,
    count=count,
    limits="a static page: nginx's own path (accept, read, sendfile, write), not CloudSuite's PHP social network",
)

# the same server and client as WEB, serving large files at a rate per connection
STREAMING = replace(
    WEB,
    name="streaming",
    what=f"media streaming: nginx serving {VIDEO_BYTES >> 20} MiB video segments, each connection held to "
    f"{STREAM_RATE.upper()}B/s, to wrk's connections",
    stands_for="media streaming",
    configure=_streaming,
    drive=_wrk("/video0.mp4"),
    limits="HTTP segments held to a rate, not CloudSuite's Darwin RTSP server",
)

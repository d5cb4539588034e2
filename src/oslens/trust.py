"""Whether a path is one that no other local user can change under us.

oslens runs as root on machines other people log in to. A file it reads
to decide what to do (tune's state), or a directory it works in, is only
as safe as every directory on the way to it: whoever can write one of
them can rename what is inside and put their own in its place. So a path
is trusted when every directory from / to it, following symbolic links
as the kernel would, belongs to root or to the caller and can be written
by no one else — or is sticky (/tmp, /dev/shm), where others cannot
rename or remove what is not theirs — and the path itself, where it
exists, belongs to root or to the caller and is writable by no one else.

This is the check OpenSSH makes of ~/.ssh and of its authorized keys
(StrictModes), made of every directory and not only the last."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

MAX_LINKS = 40  # as the kernel's own limit on links followed in one lookup


def _who(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _mine(st: os.stat_result) -> bool:
    return st.st_uid in (0, os.geteuid())


def _dir_problem(d: Path, st: os.stat_result) -> str | None:
    """Why directory d (its lstat) lets another user change what is in it."""
    if not _mine(st):
        return f"{d} belongs to {_who(st.st_uid)}"
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return f"{d} can be written by {'others' if st.st_mode & 0o002 else 'its group'}"
    return None


def problem(path: str | os.PathLike, *, _depth: int = 0) -> str | None:
    """None if no other user can change `path` or any directory on the way
    to it; else why, in a few words naming the directory. A part of the
    path that does not exist yet is fine: what is made there is made in a
    directory already checked."""
    if _depth > MAX_LINKS:
        return f"{path}: too many symbolic links"
    p = Path(os.path.abspath(path))
    cur = Path("/")
    names = p.parts[1:]
    for i, name in enumerate(names):
        try:
            st = os.lstat(cur)
        except OSError as e:
            return f"{cur}: {e.strerror}"
        if why := _dir_problem(cur, st):
            return why
        nxt = cur / name
        try:
            st = os.lstat(nxt)
        except FileNotFoundError:
            return None
        except OSError as e:
            return f"{nxt}: {e.strerror}"
        if stat.S_ISLNK(st.st_mode):
            # in a sticky directory a link's owner can point it elsewhere at any time
            if not _mine(st):
                return f"{nxt} is a link of {_who(st.st_uid)}'s"
            # the link lives in a checked directory; where it leads is checked whole
            target = Path(os.path.realpath(nxt))
            if why := problem(target, _depth=_depth + 1):
                return why
            cur = target
        else:
            cur = nxt
        if i == len(names) - 1:
            st = os.lstat(cur)
            if stat.S_ISDIR(st.st_mode):
                return _dir_problem(cur, st)
            if not _mine(st):
                return f"{cur} belongs to {_who(st.st_uid)}"
            if st.st_mode & 0o022:
                return f"{cur} can be written by {'others' if st.st_mode & 0o002 else 'its group'}"
    if not names:
        return _dir_problem(cur, os.lstat(cur))
    return None


def private_dir_problem(d: str | os.PathLike) -> str | None:
    """None if d is a directory (not a link) of the caller's that only the
    caller can enter or change: what oslens made for itself, checked
    before it is used or reused."""
    try:
        st = os.lstat(d)
    except OSError as e:
        return f"{d}: {e.strerror}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{d} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{d} belongs to {_who(st.st_uid)}"
    if st.st_mode & 0o077:
        return f"{d} has mode {stat.S_IMODE(st.st_mode):04o}, not private"
    return None

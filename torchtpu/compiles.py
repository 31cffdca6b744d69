"""Why programs were compiled: every executable-cache miss of this process, with what differed
from the nearest earlier program of the same ops (an input's sizes, strides, element type, a
static attribute) and the Python line that issued it (in DeferAndFuse, the sync point's).

    torchtpu.compile_log()        # one dict per compile, oldest first
    torchtpu.explain_compiles()   # the most frequent reasons, printed and returned

Past TORCHTPU_COMPILE_WARN_AFTER programs compiled at one Python line (64; 0 turns it off), one
warning per line says so. TORCHTPU_COMPILE_LOG=FILE appends each process's log to FILE at exit
(a JSON object a line), and `python -m torchtpu.cache explain FILE` explains that recorded run.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import sys
from collections import Counter

from . import _C, _config

DEFAULT_WARN_AFTER = 64


def compile_log() -> list[dict]:
    """Each compile of this process (the last 10,000), oldest first: `ops` (the program's ops),
    `reason`, `where` (the Python line, in DeferAndFuse the sync point's; "" when not known, as
    on a thread running no Python) and `same_ops` (programs of the same ops compiled so far,
    this one included)."""
    return [{"ops": ops, "reason": reason, "where": where, "same_ops": same_ops}
            for ops, reason, where, same_ops in _C._compile_log()]


def _kind(reason: str) -> str:
    """The reason without its numbers, so that compiles over one varying size group together."""
    return re.sub(r"-?\d+", "#", reason)


_latest_top: tuple = (None, [])  # (log version and `top`, rows) of this process's log


def top_reasons(top: int = 10, log: list[dict] | None = None) -> list[dict]:
    """The `top` most frequent (ops, Python line, kind of reason) of this process's compiles (or
    of `log`), most frequent first: {"count", "ops", "where", "reason" (the latest of them)}.
    For this process's log, computed again only when the log changed (metrics() calls it)."""
    global _latest_top
    if log is None:
        key = (_C._compile_log_version(), top)
        if _latest_top[0] != key:
            _latest_top = (key, _top_reasons(top, compile_log()))
        return [dict(row) for row in _latest_top[1]]
    return _top_reasons(top, log)


def _top_reasons(top: int, log: list[dict]) -> list[dict]:
    keys = [(r["ops"], r["where"], _kind(r["reason"])) for r in log]
    latest = {key: r["reason"] for key, r in zip(keys, log)}
    return [{"count": n, "ops": ops, "where": where, "reason": latest[ops, where, kind]}
            for (ops, where, kind), n in Counter(keys).most_common(top)]


def explain_compiles(top: int = 10, file=None, log: list[dict] | None = None) -> list[dict]:
    """The `top` most frequent (ops, Python line, kind of reason) of this process's compiles (or
    of `log`, records as compile_log() gives them), as top_reasons() gives them, and printed to
    `file` (stdout by default)."""
    whose = "in this process" if log is None else "in the recorded run"
    log = compile_log() if log is None else log
    rows = top_reasons(top, log)
    out = file if file is not None else sys.stdout
    print(f"torchtpu: {len(log)} programs compiled {whose}; the most frequent reasons:", file=out)
    for row in rows:
        where = f" at {row['where']}" if row["where"] else ""
        print(f"  {row['count']:6}  {row['ops']}{where}: {row['reason']}", file=out)
    compiled = sys.modules.get("torchtpu._compile")  # not imported: no graph was compiled
    if whose == "in this process" and compiled is not None and compiled.per_size:
        print("torchtpu: compiled graphs of varying sizes that compile per size, not in shape "
              "buckets (README, Varying shapes: buckets):", file=out)
        for name, why in list(compiled.per_size.items())[-10:]:
            print(f"  {name}: {why}", file=out)
    return rows


def load(path: str) -> list[dict]:
    """The records TORCHTPU_COMPILE_LOG saved in `path`, of every process that saved there."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _save(path: str) -> None:
    """Appends this process's log to `path` (one write, so processes sharing a file do not
    interleave their lines), each record with the process id."""
    pid = os.getpid()
    text = "".join(json.dumps({**r, "pid": pid}) + "\n" for r in compile_log())
    try:
        with open(path, "a") as f:
            f.write(text)
    except OSError as e:
        print(f"torchtpu: cannot save the compile log to {path} (TORCHTPU_COMPILE_LOG): {e}",
              file=sys.stderr)


def _from_environment() -> None:
    _C._set_compile_warning_after(
        _config.bounded_int("TORCHTPU_COMPILE_WARN_AFTER", DEFAULT_WARN_AFTER, 0, 1 << 30))
    path = os.environ.get("TORCHTPU_COMPILE_LOG")
    if path:  # where it names at start, whatever the working directory is at exit
        atexit.register(_save, os.path.abspath(path))

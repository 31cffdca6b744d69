"""The on-disk compile cache: where it is, how big it may grow, and a command to inspect it.

    python -m torchtpu.cache stats          # entries, bytes, hit rate
    python -m torchtpu.cache clear          # remove every entry
    python -m torchtpu.cache prune [--max-bytes N]   # evict least recently used entries
    python -m torchtpu.cache explain FILE [--top N]  # why a recorded run compiled (see compiles)

TORCHTPU_CACHE_DIR chooses the folder (default ~/.cache/torchtpu), TORCHTPU_CACHE=0 turns the
cache off, TORCHTPU_CACHE_MAX_BYTES bounds it (default 4 GiB). The folder must be the user's own and
writable by no one else (it is created 0700); see the README's trust model.
TORCHTPU_MEMORY_CACHE_MAX_BYTES bounds the executables kept in the process.
"""

from __future__ import annotations

import argparse
import atexit
import fcntl
import json
import os
import shutil
import stat

from . import _config

SUFFIX = ".xla"
AUTOGRAD_SUBDIRECTORY = "aotautograd"  # torch.compile's saved AOTAutograd results
STATS = "stats.json"
DEFAULT_MAX_BYTES = 4 << 30


def directory() -> str | None:
    if not _config.flag("TORCHTPU_CACHE", True):
        return None
    return os.environ.get("TORCHTPU_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "torchtpu")


def _bytes_from_environment(variable: str, default: int) -> int:
    text = os.environ.get(variable, str(default))
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{variable} must be a number of bytes, not {text!r}")
    return value


def max_bytes() -> int:
    return _bytes_from_environment("TORCHTPU_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES)


def memory_max_bytes() -> int:
    """The bound of the in-process executable cache (least recently used go first)."""
    from . import _C

    return _bytes_from_environment("TORCHTPU_MEMORY_CACHE_MAX_BYTES",
                                   _C._memory_cache_default_max_bytes)


def _entries(folder: str) -> list[tuple[str, int, float]]:
    out = []
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return out
    for name in names:
        if name.endswith(SUFFIX):
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append((path, st.st_size, st.st_mtime))
    return out


def _update_stats(folder: str, hits: int, misses: int) -> None:
    """Adds this process's disk hits and misses to the folder's running totals."""
    if not hits and not misses:
        return
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with _private_file(os.path.join(folder, STATS + ".lock"), os.O_RDWR) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        totals = _read_stats(folder)
        totals["hits"] += hits
        totals["misses"] += misses
        tmp = os.path.join(folder, f"{STATS}.{os.getpid()}.tmp")
        with _private_file(tmp, os.O_WRONLY | os.O_TRUNC) as f:
            json.dump(totals, f)
        os.replace(tmp, os.path.join(folder, STATS))


def _private_file(path: str, flags: int):
    """Opens `path` for writing as a 0600 file (whatever the umask), never through a symlink."""
    fd = os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "r+" if flags & os.O_RDWR else "w")


def _read_stats(folder: str) -> dict:
    try:
        with open(os.path.join(folder, STATS)) as f:
            data = json.load(f)
        return {"hits": int(data.get("hits", 0)), "misses": int(data.get("misses", 0))}
    except (OSError, ValueError):
        return {"hits": 0, "misses": 0}


def _record_at_exit() -> None:
    from . import _C

    if not _C._started():
        return
    m = _C._metrics()
    if "disk_cache_dir" in m:
        try:
            _update_stats(m["disk_cache_dir"], m["disk_cache_hits"], m["disk_cache_misses"])
        except OSError:  # an unwritable folder: already warned about when the cache was opened
            pass


def stats(folder: str) -> dict:
    entries = _entries(folder)
    totals = _read_stats(folder)
    lookups = totals["hits"] + totals["misses"]
    return {"directory": folder, "entries": len(entries), "bytes": sum(e[1] for e in entries),
            "hits": totals["hits"], "misses": totals["misses"],
            "hit_rate": totals["hits"] / lookups if lookups else None}


def clear(folder: str) -> int:
    """Removes every executable (the count returned) and torch.compile's saved AOTAutograd
    results."""
    shutil.rmtree(os.path.join(folder, AUTOGRAD_SUBDIRECTORY), ignore_errors=True)
    removed = 0
    for path, _, _ in _entries(folder):
        try:
            os.remove(path)
            removed += 1
        except FileNotFoundError:
            pass
    for name in (STATS,):
        try:
            os.remove(os.path.join(folder, name))
        except FileNotFoundError:
            pass
    return removed


def prune(folder: str, limit: int) -> int:
    """Evicts least recently used entries until the folder holds at most `limit` bytes, temporary
    files included; also removes temporary files a killed writer left behind. The same eviction
    runs after every store."""
    from . import _C

    return _C._prune_disk_cache(folder, limit) if os.path.isdir(folder) else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchtpu.cache", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["stats", "clear", "prune", "explain"])
    parser.add_argument("log", nargs="?", help="explain: a file TORCHTPU_COMPILE_LOG wrote")
    parser.add_argument("--max-bytes", type=int, default=None)
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    if args.command == "explain":
        if args.log is None:
            parser.error("explain needs the file a run wrote with TORCHTPU_COMPILE_LOG=FILE")
        from . import compiles

        try:
            log = compiles.load(args.log)
        except (OSError, ValueError) as e:
            print(f"cannot read the compile log {args.log}: {e}")
            return 1
        compiles.explain_compiles(args.top, log=log)
        return 0
    folder = directory()
    if folder is None:
        print("the compile cache is off (TORCHTPU_CACHE=0)")
        return 0
    if args.command == "stats":
        s = stats(folder)
        rate = "n/a" if s["hit_rate"] is None else f"{100 * s['hit_rate']:.1f}%"
        print(f"{s['directory']}: {s['entries']} entries, {s['bytes']} bytes, hit rate {rate} "
              f"({s['hits']} hits, {s['misses']} misses)")
    elif args.command == "clear":
        print(f"removed {clear(folder)} entries and the saved AOTAutograd results from {folder}")
    else:
        limit = args.max_bytes if args.max_bytes is not None else max_bytes()
        print(f"evicted {prune(folder, limit)} entries from {folder}")
    return 0


atexit.register(_record_at_exit)

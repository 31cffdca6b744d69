"""The c10d backend "tpu": torch.distributed collectives on tpu tensors, one process per device.

    dist.init_process_group("tpu")          # or init_process_group() / "tpu:tpu,cpu:gloo"
    dist.all_reduce(torch.ones(4, device="tpu"))

On the CPU plugin every collective is staged through gloo on the host: the tpu tensors are copied
(non_blocking, into one pinned host buffer per call) to the CPU, gloo runs the collective on those
host tensors asynchronously, and the returned Work's wait() waits for gloo and copies the results
back into the tpu tensors. With `async_op=True` the caller's Python runs on while gloo works.
What gloo lacks is built from what it has (AVG as SUM then a division, PREMUL_SUM as a scaling then
SUM). Collectives on CPU tensors given to this group go to the same gloo group unchanged.

gloo does not compare sizes across ranks, so each group has a launcher (`_Launcher`): a thread
that starts the group's collectives in gloo in the order they were issued, each after the ranks
agreed on its tensors, so a mismatch is an error on every rank instead of an abort.
TORCHTPU_DIST_CHECKS=0 turns it off: gloo is then called directly by the caller.

PyTorch 2.13 offers no Python subclass of the C++ c10d `Backend` (it has no Python constructor),
so the backend is a Python `ProcessGroup` subclass (PyTorch's PyProcessGroup), which
`init_process_group` installs as the group itself; C++ callers (functional collectives, DDP's
reducer) reach its methods through that class's virtual overrides.
"""

from __future__ import annotations

import datetime
import json
import os
import queue
import socket
import threading
import time
import weakref
import zlib

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d
from torch.distributed import ReduceOp

from . import _C, _config

NAME = "tpu"
_RedOp = ReduceOp.RedOpType


# ----------------------------------------------------------------------------------------------
# Host staging


def _is_tpu(t: torch.Tensor) -> bool:
    return t.device.type == NAME


def _check_dense(tensors, what: str) -> None:
    for t in tensors:
        if _is_tpu(t) and not (t.is_contiguous() or t.is_contiguous(
                memory_format=torch.channels_last)):
            raise ValueError(f"torchtpu: the {what} tensors of a collective must be contiguous "
                             f"(got sizes {list(t.shape)}, strides {list(t.stride())})")


class _Host:
    """Host copies of some tensors, one flat pinned buffer per dtype: `views[i]` is tensor i's
    host tensor (the tensor itself when it is on the CPU already). Pinned memory comes from
    torchtpu's host allocator, which keeps freed blocks for reuse (a new block page-faults on its
    first write, which for large ones costs as much as the copy) and frees none while a copy or
    gloo still uses it."""

    def __init__(self, tensors, download: bool):
        self.tensors = list(tensors)
        self.views = [None] * len(self.tensors)
        sizes: dict[torch.dtype, int] = {}
        for t in self.tensors:
            if _is_tpu(t):
                sizes[t.dtype] = sizes.get(t.dtype, 0) + t.numel()
        flats = {dt: torch.empty(n * dt.itemsize, dtype=torch.uint8, pin_memory=True).view(dt)
                 for dt, n in sizes.items()}
        self.flats = flats
        offsets = dict.fromkeys(sizes, 0)
        launched = False
        for i, t in enumerate(self.tensors):
            if not _is_tpu(t):
                self.views[i] = t
                continue
            o = offsets[t.dtype]
            offsets[t.dtype] = o + t.numel()
            view = flats[t.dtype][o:o + t.numel()].view(t.shape)
            if t.stride() != view.stride():  # channels_last: keep the caller's layout
                view = view.as_strided(t.shape, t.stride())
            if download and t.numel():
                view.copy_(t, non_blocking=True)
                launched = True
            self.views[i] = view
        if launched:  # the downloads run concurrently; gloo reads them only when all are done
            torch.tpu.current_stream().synchronize()

    @property
    def flat(self) -> torch.Tensor | None:
        """The one host buffer holding every tensor in order, if there is one (all on tpu, one
        dtype, all contiguous)."""
        if len(self.flats) != 1 or not all(_is_tpu(t) and t.is_contiguous() for t in self.tensors):
            return None
        return next(iter(self.flats.values()))

    def upload(self, indices=None) -> None:
        """Copies the host values back into the tensors (into tpu ones non_blocking: the pinned
        buffer lives until the device has read it). A tpu tensor alone in its host buffer takes
        that buffer as its contents instead, without a copy where the plugin can (the CPU
        plugin): this object is done with it."""
        for i in range(len(self.tensors)) if indices is None else indices:
            t, v = self.tensors[i], self.views[i]
            if not t.numel() or v is t:
                continue
            t = t.detach()  # a received leaf may require grad (pipelining)
            flat = self.flats.get(t.dtype) if _is_tpu(t) else None
            if flat is not None and v.data_ptr() == flat.data_ptr() and v.numel() == flat.numel():
                _C._adopt_pinned(v, t)
            else:
                t.copy_(v, non_blocking=_is_tpu(t))


def _upload_all(hosts):
    def finish():
        for h in hosts:
            h.upload()
    return finish


# ----------------------------------------------------------------------------------------------
# Work


class _Work(dist._Work):
    """A collective in flight: gloo's Works on the host tensors (`inner`: one, a list, or None),
    or our own Works it stands for (`parts`), then `finish` (the copy back into the tpu tensors),
    run once, by wait(), is_completed() or when the future completes. gloo's Works arrive with
    launched(): at once, or from the group's launcher once the ranks agreed (which may instead
    hand it the error that ends this Work)."""

    def __init__(self, pg: ProcessGroupTPU, what: str, finish=None, result=None, parts=()):
        super().__init__()
        self._pg, self._what, self._finish = pg, what, finish
        self._inners: list = []
        self._parts = list(parts)
        self._result = [] if result is None else result
        self._lock = threading.Lock()
        self._finished = False
        self._error: BaseException | None = None
        self._future = None
        self._is_launched = threading.Event()
        self._on_launch: list | None = []  # callbacks until launched, then None

    def launched(self, inner=None, error: BaseException | None = None) -> None:
        """gloo runs the collective (`inner`: its Work, a list of them, or None), or it was never
        started (`error`)."""
        with self._lock:
            self._inners = [] if inner is None else inner if isinstance(inner, list) else [inner]
            if error is not None and self._error is None:
                self._error = error
            callbacks, self._on_launch = self._on_launch, None
            self._is_launched.set()
        for fn in callbacks:
            fn()

    def _after_launch(self, fn) -> None:
        with self._lock:
            if self._on_launch is not None:
                self._on_launch.append(fn)
                return
        fn()

    def _complete(self) -> None:
        with self._lock:
            if self._error is not None:
                raise self._error
            if self._finished:
                return
            try:
                if self._finish is not None:
                    self._finish()
            except BaseException as e:
                self._error = e
                raise
            self._finished = True
            self._finish = None

    def _fail(self, error: RuntimeError):
        with self._lock:
            if self._error is None:
                self._error = self._pg._failure(self._what, error)
        raise self._error from error

    def wait(self, timeout=None) -> bool:
        if self._error is not None:
            raise self._error
        if timeout == datetime.timedelta(0):
            timeout = None
        for w in self._parts:
            w.wait(timeout)
        if not self._is_launched.wait(None if timeout is None else timeout.total_seconds()):
            self._fail(RuntimeError(f"timed out after {timeout} before the ranks agreed on it"))
        if self._error is not None:
            raise self._error
        for w in self._inners:
            try:
                if timeout is None:
                    w.wait()
                else:
                    w.wait(timeout)
            except RuntimeError as e:
                self._fail(e)
        self._complete()
        return True

    def is_completed(self) -> bool:
        """Whether the results are in place (the copy back is done here once gloo is)."""
        if not (self._finished or self._error is not None) and self._is_launched.is_set() and all(
                w.is_completed() for w in self._inners + self._parts):
            try:
                self.wait()
            except RuntimeError:
                pass
        return self._finished or self._error is not None

    def is_success(self) -> bool:
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result

    def source_rank(self) -> int:
        self._is_launched.wait()
        return self._inners[0].source_rank()

    def synchronize(self) -> None:
        self.wait()

    def get_future(self):
        with self._lock:
            if self._future is not None:
                return self._future
            devices = sorted({str(t.device) for t in self._result
                              if isinstance(t, torch.Tensor) and t.device.type != "cpu"})
            fut = torch.futures.Future(devices=devices or None)
            self._future = fut
        self._after_launch(lambda: self._settle(fut))
        return fut

    def _settle(self, fut) -> None:
        """Completes `fut` when gloo's Works and the parts are done (they are all launched)."""
        if self._error is not None:  # never started
            fut.set_exception(self._error)
            return
        waiting = [w.get_future() for w in self._inners + self._parts]
        left = [len(waiting)]
        lock = threading.Lock()

        def done():
            try:
                for f in waiting:
                    try:
                        f.value()  # raises gloo's error (never wait() in its callback)
                    except RuntimeError as e:
                        if self._error is None:
                            self._fail(e)
                        raise
                self._complete()
            except BaseException as e:  # noqa: BLE001  (handed to the future's waiters)
                fut.set_exception(e)
                return
            fut.set_result(self._result)

        def one_done(_):
            with lock:
                left[0] -= 1
                last = left[0] == 0
            if last:
                done()

        for f in waiting:
            f.add_done_callback(one_done)
        if not waiting:
            done()


# ----------------------------------------------------------------------------------------------
# Reduction operators gloo lacks


def _reduction(op):
    """(the gloo ReduceOp, a step on the host inputs before, a step on the host results after)."""
    kind = op.op if isinstance(op, ReduceOp) else op
    if kind == _RedOp.AVG:
        return ReduceOp.SUM, None, "avg"
    if kind == _RedOp.PREMUL_SUM:
        return ReduceOp.SUM, op.factor, None
    return op, None, None


def _premul(views, factor) -> None:
    for v in views:
        if isinstance(factor, torch.Tensor):
            v.mul_(factor.to(device="cpu", dtype=v.dtype))
        else:
            v.mul_(factor)


def _average(views, size: int) -> None:
    for v in views:
        if v.dtype == torch.bool:
            raise ValueError("torchtpu: ReduceOp.AVG is not defined for bool tensors")
        if v.dtype.is_floating_point or v.dtype.is_complex:
            v.div_(size)
        else:
            v.div_(size, rounding_mode="trunc")


# ----------------------------------------------------------------------------------------------
# The process group


_LOST_PEER = ("connection", "timed out", "timeout", "closed", "reset", "broken pipe")
_SIGNATURE_BYTES = 1024


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True


def _signature(tensors) -> list:
    """Each tensor's dtype and element count: gloo and NCCL exchange counts, so ranks may pass
    tensors of other shapes with as many elements (a (2, 3) reduced with a (3, 2))."""
    return [[str(t.dtype).removeprefix("torch."), t.numel()] for t in tensors]


def _disagreement(ranks) -> str | None:
    """What is wrong with the ranks' [collective, signature, splits], or None."""
    if any(r[:2] != ranks[0][:2] for r in ranks):
        return "the ranks called different collectives, or on different tensors"
    if ranks[0][2] is not None:  # all_to_all: what r sends to j, j must receive from r
        for r, (_, _, (sends, _)) in enumerate(ranks):
            for j, (_, _, (_, recvs)) in enumerate(ranks):
                if sends[j] != recvs[r]:
                    return (f"rank {r} sends {sends[j]} elements to rank {j}, which expects "
                            f"{recvs[r]}")
    return None


def _splits(n: int, splits, size: int) -> list[int]:
    """All-to-all split sizes in elements (even splits when none are given)."""
    if not splits:
        return [n // size] * size
    rows = sum(splits)
    return [s * (n // rows if rows else 0) for s in splits]


class _Launcher:
    """Starts a group's collectives in gloo, in the order they were issued, each once the ranks
    agreed on it: one thread per group, which first exchanges every rank's collective, dtypes and
    element counts (one small all_gather on a gloo group of its own, so it never interleaves with
    the data), then calls gloo. gloo does not compare sizes across ranks: a rank receiving more than
    it expects aborts, one receiving less waits until the timeout. Here a mismatch fails the
    collective's Work on every rank with the same error, and the group stays usable. The caller
    never waits for its peers, so async_op keeps its meaning."""

    def __init__(self, gloo, rank: int):
        self._gloo = gloo
        self._calls: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=f"torchtpu-collectives-{rank}",
                                        daemon=True)
        self._thread.start()

    def put(self, work: _Work, seq: int, check: list, launch) -> None:
        """Runs `launch()` (the call into gloo) for `work`, collective #`seq` of the group, once
        every rank's `check` ([collective, signature, all_to_all splits]) agrees with this one."""
        self._calls.put((work, seq, check, launch))

    def close(self, timeout: float = 30.0) -> None:
        """Ends the thread once the collectives issued so far are started, and waits for it: its
        gloo group is then gone (one left to the interpreter's exit can abort the process while
        the runtime below it is torn down)."""
        self._calls.put(None)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            calls = [self._calls.get()]
            while not self._calls.empty():  # issued meanwhile: their exchanges overlap
                calls.append(self._calls.get())
            closing = None in calls
            if closing:
                calls = calls[:calls.index(None)]
            exchanges = [self._exchange(check) for _, _, check, _ in calls]
            for (work, seq, _, launch), exchange in zip(calls, exchanges):
                try:
                    inner, error = self._start(work, seq, exchange, launch), None
                except Exception as e:  # noqa: BLE001  (raised by the Work's wait())
                    inner, error = None, e
                try:
                    work.launched(inner, error)
                except Exception:  # noqa: BLE001, S110
                    # A callback's error is its future's: this thread goes on serving the group.
                    pass
            if closing:
                self._gloo = None  # destroyed here, on this thread, while everything is alive
                return

    def _start(self, work: _Work, seq: int, exchange, launch):
        """gloo's Work for the call, once the ranks agreed on it."""
        try:
            ranks = exchange()
        except RuntimeError as e:  # a peer exited or did not come within the timeout
            raise work._pg._failure(work._what, e) from e
        problem = _disagreement(ranks)
        if problem:
            shown = "; ".join(f"rank {r}: {w} of {s}" for r, (w, s, _) in enumerate(ranks))
            raise RuntimeError(f"torchtpu: collective #{seq} of this group: {problem} ({shown})")
        return launch()

    def _exchange(self, check: list):
        """Starts the exchange of every rank's `check`, and returns the function that waits for
        it and reads them. A rank's row holds its collective and signature as JSON (a digest
        when that is too long, the same on ranks that agree), then its all_to_all splits as
        int64: they differ by rank, so they are never digested, and the group's size fixes
        their room."""
        what, sig, splits = check
        head = json.dumps([what, sig]).encode()
        if len(head) > _SIGNATURE_BYTES:
            head = json.dumps([what, f"crc {zlib.crc32(head)}"]).encode()
        size = self._gloo.size()
        everyone = torch.empty(size, _SIGNATURE_BYTES + 16 * size, dtype=torch.uint8)
        try:
            row = torch.zeros(_SIGNATURE_BYTES + 16 * size, dtype=torch.uint8)
            row[:len(head)] = torch.frombuffer(bytearray(head), dtype=torch.uint8)
            if splits is not None:
                row[_SIGNATURE_BYTES:].view(torch.int64).copy_(
                    torch.tensor(splits[0] + splits[1]))
            gathering, error = self._gloo._allgather_base(everyone.view(-1), row), None
        except Exception as e:  # noqa: BLE001  (raised by the Work's wait(), in read())
            gathering, error = None, e

        def read() -> list:
            if gathering is None:
                raise error
            gathering.wait()
            rows = everyone.numpy()
            heads = [json.loads(head)] * size if (rows == rows[0]).all() else [  # the usual case
                json.loads(bytes(h[h != 0]).decode()) for h in rows[:, :_SIGNATURE_BYTES]]
            if splits is None:
                return [[w, s, None] for w, s in heads]
            counts = everyone[:, _SIGNATURE_BYTES:].contiguous().view(torch.int64).tolist()
            return [[w, s, (c[:size], c[size:])] for (w, s), c in zip(heads, counts)]
        return read


def _opts(cls, given, **fields):
    """gloo's options for a collective: `given`'s timeout, and `fields`."""
    opts = cls()
    if given is not None and hasattr(given, "timeout"):
        opts.timeout = given.timeout
    for k, v in fields.items():
        setattr(opts, k, v)
    return opts


def _op_name(opts) -> str:
    op = _op_of(opts)
    return str(op.op if isinstance(op, ReduceOp) else op).rpartition(".")[2]


def _op_of(opts):
    return opts.reduceOp if opts is not None else ReduceOp.SUM


class ProcessGroupTPU(dist.ProcessGroup):
    """Collectives on tpu tensors, staged through a gloo group made on a prefix of `store`."""

    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        self._rank, self._size, self._timeout = rank, size, timeout
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpu-gloo/", store), rank, size,
                                           timeout)
        # The gloo group also serves CPU tensors, and is what c10d's lookups by device see (the
        # group's name, _device_types, object collectives). It is not registered for "tpu":
        # gloo would read a tpu tensor's (inaccessible) memory in some of its collectives, so a
        # C++ path this class does not override raises "No backend type associated with device
        # type tpu" instead.
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO,
                               self._gloo)
        self._set_default_backend(dist.ProcessGroup.BackendType.GLOO)
        self._seq = 0
        self._issuing = threading.Lock()
        self._coalesced: list[_Work] | None = None
        # TORCHTPU_DIST_CHECKS=0: gloo is called directly, without the ranks agreeing first.
        self._launcher = None
        if _config.flag("TORCHTPU_DIST_CHECKS", True):
            self._launcher = _Launcher(dist.ProcessGroupGloo(
                dist.PrefixStore("tpu-agree/", store), rank, size, timeout), rank)
            weakref.finalize(self, self._launcher.close, 2.0)
        # Who is who, for failures: each rank's host and pid (read once here, since the store
        # may live in the rank that dies).
        store.set(f"tpu-pid/{rank}", f"{socket.gethostname()}:{os.getpid()}")
        self._peers = [store.get(f"tpu-pid/{r}").decode() for r in range(size)]

    # -- identity -----------------------------------------------------------------------------

    def getBackendName(self) -> str:
        return NAME

    def getRank(self) -> int:
        return self._rank

    def getSize(self) -> int:
        return self._size

    def __repr__(self) -> str:
        return f"ProcessGroupTPU(rank={self._rank}, size={self._size})"

    # -- failures ------------------------------------------------------------------------------

    def _dead_ranks(self) -> list[int]:
        """The other ranks on this host whose process has exited (or is exiting: a zombie)."""
        here = socket.gethostname()
        dead = []
        for r, who in enumerate(self._peers):
            host, _, pid = who.rpartition(":")
            if r != self._rank and host == here and not _running(int(pid)):
                dead.append(r)
        return dead

    def _failure(self, what: str, error: BaseException) -> BaseException:
        """gloo's error, naming the collective, this rank, and the ranks that have exited."""
        message = str(error)
        if not any(w in message.lower() for w in _LOST_PEER):
            return RuntimeError(f"torchtpu: {what} failed on rank {self._rank}: {message}")
        dead = self._dead_ranks()
        for _ in range(20):  # a peer's socket closes a moment before its process is gone
            if dead:
                break
            time.sleep(0.05)
            dead = self._dead_ranks()
        if dead:
            cause = (f"rank{'s' if len(dead) > 1 else ''} {', '.join(map(str, dead))} "
                     f"{'have' if len(dead) > 1 else 'has'} exited")
        else:
            cause = (f"no rank on this host has exited: one did not call it within the "
                     f"timeout ({self._timeout}), called another collective, or is on another "
                     f"host")
        return dist.DistBackendError(
            f"torchtpu: {what} failed on rank {self._rank} of {self._size}: {cause}. "
            f"gloo: {message}")

    # -- issuing a call into gloo -------------------------------------------------------------

    def _work(self, name: str, launch=None, finish=None, result=None, parts=(),
              check=None) -> _Work:
        """The Work of one call into gloo: `launch()` makes the call and returns gloo's Work (or
        a list, or None). A collective names its `check` ([collective, tensor signature,
        all_to_all splits]): with the checks on, the launcher makes its call once the ranks
        agree on it. Anything else (point-to-point, a Work standing for others) starts here: a
        send or recv waits for no collective issued before it (gloo matches them by peer and
        tag, apart from the collectives' order), and the peer may need it before it reaches
        that collective."""
        queued = self._launcher is not None and check is not None
        inner = launch() if launch is not None and not queued else None
        with self._issuing:  # the collectives' numbers are the launcher's order
            self._seq += 1
            work = _Work(self, f"{name} (collective #{self._seq} of this group)", finish, result,
                         parts)
            if queued:
                self._launcher.put(work, self._seq, check, launch)
        if not queued:
            work.launched(inner)
        if self._coalesced is not None:
            self._coalesced.append(work)
        return work

    def _reduced(self, name, tensors, host_in, host_out, opts, launch, check) -> _Work:
        """A reduction: premultiplies the host inputs (PREMUL_SUM), launches gloo with the op it
        has, and averages the host results (AVG) before copying them back."""
        gloo_op, factor, post = _reduction(_op_of(opts))
        if factor is not None:
            _premul(host_in.views, factor)

        def finish():
            if post == "avg":
                _average(host_out.views, self._size)
            host_out.upload()
        return self._work(name, lambda: launch(gloo_op), finish, list(host_out.tensors),
                          check=check)

    def shutdown(self) -> None:
        if self._launcher is not None:
            self._launcher.close()
        super().shutdown()

    # -- all_reduce, reduce --------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        _check_dense(tensors, "input")
        host = _Host(tensors, download=True)
        return self._reduced(
            "all_reduce", tensors, host, host, opts,
            lambda op: self._gloo.allreduce(host.views,
                                            _opts(dist.AllreduceOptions, opts, reduceOp=op)),
            [f"all_reduce {_op_name(opts)}", _signature(tensors), None])

    def allreduce_coalesced(self, tensors, opts=None):
        _check_dense(tensors, "input")
        host = _Host(tensors, download=True)
        flat = host.flat

        def launch(op):
            if flat is not None:  # one buffer already: gloo need not flatten it again
                return self._gloo.allreduce([flat], _opts(dist.AllreduceOptions, opts, reduceOp=op))
            return self._gloo.allreduce_coalesced(
                host.views, _opts(dist.AllreduceCoalescedOptions, opts, reduceOp=op))
        return self._reduced("all_reduce_coalesced", tensors, host, host, opts, launch,
                             [f"all_reduce_coalesced {_op_name(opts)}", _signature(tensors), None])

    def reduce(self, tensors, opts=None):
        _check_dense(tensors, "input")
        root = opts.rootRank == self._rank
        host = _Host(tensors, download=True)
        out = host if root else _Host([], download=False)  # only the root's tensor changes
        return self._reduced("reduce", tensors, host, out, opts, lambda op: self._gloo.reduce(
            host.views, _opts(dist.ReduceOptions, opts, reduceOp=op, rootRank=opts.rootRank,
                              rootTensor=opts.rootTensor)),
            [f"reduce {_op_name(opts)} to {opts.rootRank}", _signature(tensors), None])

    # -- broadcast, scatter, gather ------------------------------------------------------------

    def broadcast(self, tensors, opts=None):
        if isinstance(tensors, torch.Tensor):
            tensors = [tensors]
        opts = opts if opts is not None else dist.BroadcastOptions()
        _check_dense(tensors, "input")
        root = opts.rootRank == self._rank
        host = _Host(tensors, download=root)
        return self._work("broadcast", lambda: self._gloo.broadcast(host.views, _opts(
            dist.BroadcastOptions, opts, rootRank=opts.rootRank, rootTensor=opts.rootTensor)),
            None if root else host.upload, list(tensors),
            check=[f"broadcast from {opts.rootRank}", _signature(tensors), None])

    def scatter(self, outputs, input_lists, opts=None):
        _check_dense(outputs, "output")
        host_out = _Host(outputs, download=False)
        host_in = [_Host(ts, download=True) for ts in input_lists]
        return self._work("scatter", lambda: self._gloo.scatter(
            host_out.views, [h.views for h in host_in],
            _opts(dist.ScatterOptions, opts, rootRank=opts.rootRank)),
            host_out.upload, list(outputs),
            check=[f"scatter from {opts.rootRank}", _signature(outputs), None])

    def _into_lists(self, name, output_lists, inputs, launch, check) -> _Work:
        """A collective writing lists of outputs: launch(host output lists, host inputs)."""
        _check_dense(inputs, "input")
        host_in = _Host(inputs, download=True)
        host_out = [_Host(ts, download=False) for ts in output_lists]
        return self._work(name, lambda: launch([h.views for h in host_out], host_in.views),
                          _upload_all(host_out), [t for ts in output_lists for t in ts],
                          check=check)

    def gather(self, output_lists, inputs, opts=None):
        return self._into_lists("gather", output_lists, inputs, lambda outs, ins: self._gloo.gather(
            outs, ins, _opts(dist.GatherOptions, opts, rootRank=opts.rootRank)),
            [f"gather to {opts.rootRank}", _signature(inputs), None])

    # -- all_gather ----------------------------------------------------------------------------

    def all_gather_single(self, output, input, opts=None):
        _check_dense([output, input], "all_gather")
        host_in = _Host([input], download=True)
        host_out = _Host([output], download=False)
        return self._work("all_gather_into_tensor", lambda: self._gloo._allgather_base(
            host_out.views[0], host_in.views[0], _opts(_c10d.AllgatherOptions, opts)),
            host_out.upload, [output],
            check=["all_gather_into_tensor", _signature([input, output]), None])

    _allgather_base = all_gather_single

    def allgather(self, output_lists, inputs, opts=None):
        _check_dense(inputs, "input")
        host_in = _Host(inputs, download=True)
        (outputs,) = output_lists
        host_out = _Host(outputs, download=False)
        flat = host_out.flat
        if flat is not None and len(inputs) == 1 and all(
                t.numel() == inputs[0].numel() for t in outputs):  # one buffer, no regrouping
            def launch():
                return self._gloo._allgather_base(flat, host_in.views[0].reshape(-1),
                                                  _opts(_c10d.AllgatherOptions, opts))
        else:
            def launch():
                return self._gloo.allgather([host_out.views], host_in.views,
                                            _opts(_c10d.AllgatherOptions, opts))
        return self._work("all_gather", launch, host_out.upload, list(outputs),
                          check=["all_gather", _signature(inputs), None])

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        return self._into_lists(
            "all_gather_coalesced", output_lists, inputs,
            lambda outs, ins: self._gloo.allgather_coalesced(outs, ins,
                                                             _opts(_c10d.AllgatherOptions, opts)),
            ["all_gather_coalesced", _signature(inputs), None])

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """Each output i gathers every rank's input i: one gloo all_gather of all the inputs in
        one buffer, each output read back from its column of the result."""
        _check_dense(inputs + outputs, "all_gather")
        host_in = _Host(inputs, download=True)
        flat = host_in.flat
        if flat is None:  # several dtypes: one all_gather each
            works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
            return self._group_work("all_gather_into_tensor_coalesced", works)
        gathered = torch.empty(self._size, flat.numel(), dtype=flat.dtype, pin_memory=True)

        def finish():
            o = 0
            for out, inp in zip(outputs, inputs):
                n = inp.numel()
                out.detach().copy_(gathered[:, o:o + n].reshape(out.shape))
                o += n
        return self._work("all_gather_into_tensor_coalesced", lambda: self._gloo._allgather_base(
            gathered.view(-1), flat, _opts(_c10d.AllgatherOptions, opts)), finish, list(outputs),
            check=["all_gather_into_tensor_coalesced", _signature(inputs + outputs), None])

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    # -- reduce_scatter ------------------------------------------------------------------------

    def reduce_scatter_single(self, output, input, opts=None):
        _check_dense([output, input], "reduce_scatter")
        host_in = _Host([input], download=True)
        host_out = _Host([output], download=False)
        return self._reduced(
            "reduce_scatter_tensor", [output], host_in, host_out, opts,
            lambda op: self._gloo._reduce_scatter_base(
                host_out.views[0], host_in.views[0],
                _opts(dist.ReduceScatterOptions, opts, reduceOp=op)),
            [f"reduce_scatter_tensor {_op_name(opts)}", _signature([input, output]), None])

    _reduce_scatter_base = reduce_scatter_single

    def reduce_scatter(self, outputs, input_lists, opts=None):
        (inputs,) = input_lists
        _check_dense(inputs + list(outputs), "reduce_scatter")
        host_in = _Host(inputs, download=True)
        host_out = _Host(outputs, download=False)
        flat = host_in.flat
        if flat is not None and all(t.numel() == outputs[0].numel() for t in inputs):
            def launch(op):  # the inputs lie in one buffer already, in rank order
                return self._gloo._reduce_scatter_base(
                    host_out.views[0].reshape(-1), flat,
                    _opts(dist.ReduceScatterOptions, opts, reduceOp=op))
        else:
            def launch(op):
                return self._gloo.reduce_scatter(
                    host_out.views, [host_in.views],
                    _opts(dist.ReduceScatterOptions, opts, reduceOp=op))
        return self._reduced("reduce_scatter", outputs, host_in, host_out, opts, launch,
                             [f"reduce_scatter {_op_name(opts)}", _signature(inputs), None])

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        """reduce_scatter of several tensors, staged in one host buffer: one gloo all_reduce
        per tensor, each output then read from its rank's slice (gloo's own reduce_scatter is
        that all_reduce, so the values are its values, bitwise)."""
        _check_dense(inputs + outputs, "reduce_scatter")
        host = _Host(inputs, download=True)
        mine = _Host([], download=False)
        mine.tensors = list(outputs)
        # The rank's part of each input's memory, as the output lays it out (NCCL's copy): a
        # view of the host buffer, never a copy, so that it holds the reduced values.
        mine.views = [v.as_strided(o.shape, o.stride(), v.storage_offset() + self._rank * o.numel())
                      for v, o in zip(host.views, outputs)]
        return self._reduced(
            "reduce_scatter_tensor_coalesced", outputs, host, mine, opts,
            lambda op: [self._gloo.allreduce([v], _opts(dist.AllreduceOptions, opts, reduceOp=op))
                        for v in host.views],
            [f"reduce_scatter_tensor_coalesced {_op_name(opts)}", _signature(inputs + outputs),
             None])

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    # -- all_to_all ----------------------------------------------------------------------------

    def all_to_all_single(self, output, input, output_splits, input_splits, opts=None):
        _check_dense([output, input], "all_to_all")
        host_in = _Host([input], download=True)
        host_out = _Host([output], download=False)
        return self._work("all_to_all_single", lambda: self._gloo.alltoall_base(
            host_out.views[0], host_in.views[0], output_splits, input_splits,
            _opts(dist.AllToAllOptions, opts)), host_out.upload, [output],
            check=["all_to_all_single", [str(input.dtype), list(input.shape[1:])],
                   [_splits(input.numel(), input_splits, self._size),
                    _splits(output.numel(), output_splits, self._size)]])

    alltoall_base = all_to_all_single

    def alltoall(self, outputs, inputs, opts=None):
        _check_dense(inputs + outputs, "all_to_all")
        host_in = _Host(inputs, download=True)
        host_out = _Host(outputs, download=False)
        fin, fout = host_in.flat, host_out.flat
        if fin is not None and fout is not None and fin.dtype == fout.dtype:
            def launch():  # one buffer each way: gloo's split all_to_all moves each tensor's
                return self._gloo.alltoall_base(  # elements
                    fout, fin, [t.numel() for t in outputs], [t.numel() for t in inputs],
                    _opts(dist.AllToAllOptions, opts))
        else:
            def launch():
                return self._gloo.alltoall(host_out.views, host_in.views,
                                           _opts(dist.AllToAllOptions, opts))
        return self._work("all_to_all", launch, host_out.upload, list(outputs),
                          check=["all_to_all", [str(t.dtype) for t in inputs[:1]],
                                 [[t.numel() for t in inputs], [t.numel() for t in outputs]]])

    # -- point to point ------------------------------------------------------------------------

    def send(self, tensors, dst: int, tag: int = 0):
        _check_dense(tensors, "input")
        host = _Host(tensors, download=True)
        return self._work(f"send to rank {dst}", lambda: self._gloo.send(host.views, dst, tag),
                          result=list(tensors))

    def recv(self, tensors, src: int, tag: int = 0):
        _check_dense(tensors, "output")
        host = _Host(tensors, download=False)
        return self._work(f"recv from rank {src}", lambda: self._gloo.recv(host.views, src, tag),
                          host.upload, list(tensors))

    def recv_anysource(self, tensors, tag: int = 0):
        _check_dense(tensors, "output")
        host = _Host(tensors, download=False)
        return self._work("recv from any rank", lambda: self._gloo.recv_anysource(host.views, tag),
                          host.upload, list(tensors))

    # -- barrier, coalescing -------------------------------------------------------------------

    def barrier(self, opts=None):
        return self._work("barrier", lambda: self._gloo.barrier(_opts(dist.BarrierOptions, opts)),
                          check=["barrier", [], None])

    def _group_work(self, name: str, works) -> _Work:
        """One Work for several: waits for each in order."""
        def finish():
            for w in works:
                w.wait()
        if self._coalesced is not None:  # the parts stand for themselves there
            for w in works:
                self._coalesced.remove(w)
        return self._work(name, None, finish, [t for w in works for t in w._result], works)

    def _start_coalescing(self, device) -> None:
        if self._coalesced is not None:
            raise RuntimeError("torchtpu: coalescing has started already on this group")
        self._coalesced = []

    def _end_coalescing(self, device):
        works, self._coalesced = self._coalesced or [], None
        return self._group_work("coalesced collectives", works)


def _outside_dynamo(cls) -> None:
    """C++ callers (DDP's reducer, c10d's functional collectives) run these methods as new Python
    frames, which Dynamo would try to trace when a compiled frame is on the stack: they are host
    code and run as written."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and not name.startswith("__"):
            setattr(cls, name, torch._disable_dynamo(fn))


_outside_dynamo(ProcessGroupTPU)
_outside_dynamo(_Work)


def _create(options, backend_options=None) -> ProcessGroupTPU:
    """The creator `register_backend(extended_api=True)` calls, with c10d's
    _DistributedBackendOptions (store, group_rank, group_size, timeout, ...)."""
    return ProcessGroupTPU(options.store, options.group_rank, options.group_size, options.timeout)


def _register() -> None:
    if NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(NAME, _create, extended_api=True, devices=[NAME])

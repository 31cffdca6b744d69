"""torchtpu in processes and threads: fork, exit. Each case runs in a fresh interpreter, since
what is tested is the process's own life."""

from conftest import run_python

BAD_FORK = ("Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you "
            "must use the 'spawn' start method")


def test_fork_after_start_marks_the_child_and_every_use_raises():
    r = run_python("""
        import os, torch
        x = torch.ones(3, device="tpu") + 1
        assert not torch.tpu._is_in_bad_fork()
        pid = os.fork()
        if pid == 0:
            print("bad fork", torch.tpu._is_in_bad_fork(), torch.tpu.is_initialized(), flush=True)
            for use in (lambda: torch.ones(3, device="tpu"), lambda: x + 1, lambda: x.cpu(),
                        torch.tpu.synchronize, torch.tpu.init):
                try:
                    use()
                    print("no error", flush=True)
                except RuntimeError as e:
                    print("RuntimeError", e, flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("child exit", os.waitstatus_to_exitcode(status), x.cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "bad fork True False"
    assert lines[1:6] == ["RuntimeError " + BAD_FORK] * 5
    assert lines[6] == "child exit 0 [2.0, 2.0, 2.0]"


def test_fork_context_child_that_never_uses_tpu_works():
    r = run_python("""
        import multiprocessing as mp, sys, torch
        x = torch.ones(3, device="tpu") * 2  # globals the child inherits and destroys at exit
        def work(q):
            q.put(sum(range(10)))
            sys.exit(0)
        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            print(q.get(timeout=60), end=" ")
            p.join(60)
            print(p.exitcode, x.cpu().tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "45 0 [2.0, 2.0, 2.0]"


def test_fork_context_child_using_tpu_raises_instead_of_hanging():
    r = run_python("""
        import multiprocessing as mp, torch
        torch.ones(1, device="tpu").cpu()
        def work(q):
            try:
                torch.ones(3, device="tpu")
                q.put("no error")
            except RuntimeError as e:
                q.put(str(e))
        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q,))
            p.start()
            print(q.get(timeout=60))
            p.join(60)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == BAD_FORK


def test_fork_before_start_leaves_the_child_free_to_use_tpu():
    r = run_python("""
        import os, torch
        pid = os.fork()
        if pid == 0:
            print("child", torch.tpu._is_in_bad_fork(),
                  (torch.ones(3, device="tpu") + 1).cpu().tolist(), flush=True)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        print("parent", os.waitstatus_to_exitcode(status),
              (torch.ones(2, device="tpu") * 3).tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["child False [2.0, 2.0, 2.0]", "parent 0 [3.0, 3.0]"]


def test_exit_while_daemon_threads_run_tpu_ops_is_clean():
    r = run_python("""
        import threading, torch
        steps = [0, 0]
        def work(n):
            x = torch.ones(64, 64, device="tpu") * (n + 1)
            while True:
                x = (x @ x).tanh()
                x.sum().item()
                steps[n] += 1
        for n in range(2):
            threading.Thread(target=work, args=(n,), daemon=True).start()
        while min(steps) < 3:  # every op the loop runs has been seen once: now in full swing
            threading.Event().wait(0.05)
        print("exiting", flush=True)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "exiting"
    assert "terminate called" not in r.stderr


def test_exit_with_an_idle_daemon_thread_that_used_tpu_is_clean():
    r = run_python("""
        import threading, torch
        done, never = threading.Event(), threading.Event()
        def work():
            print((torch.ones(3, device="tpu") + 1).tolist(), flush=True)
            done.set()
            never.wait()
        threading.Thread(target=work, daemon=True).start()
        done.wait(120)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[2.0, 2.0, 2.0]"



# torch.multiprocessing shares CUDA tensors with the receiver; a tpu storage belongs to this
# process's client, so sending one raises what to do instead (it had failed with "_share_fd_: only
# available on CPU"). CPU tensors still go through shared memory.
def test_tpu_tensors_sent_to_another_process_raise_what_to_do():
    r = run_python("""
        import torch, torch.multiprocessing as mp
        ctx = mp.get_context("spawn")
        for sent in (torch.ones(2, device="tpu"), torch.nn.Parameter(torch.ones(2, device="tpu"))):
            try:
                ctx.Process(target=print, args=(sent,)).start()
                print("started")
            except RuntimeError as e:
                print("RuntimeError", e)
        child = ctx.Process(target=print, args=(torch.ones(2),))
        child.start()
        child.join()
        print("cpu exit", child.exitcode)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 4, r.stdout
    for line in lines[:2]:
        assert line.startswith("RuntimeError torchtpu: a tpu tensor cannot be shared"), line
        assert "send tensor.cpu()" in line
    assert lines[2:] == ["tensor([1., 1.])", "cpu exit 0"]

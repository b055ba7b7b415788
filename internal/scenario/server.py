# A stand-in for a model server, for gputriage's tests and fixtures: it loads "weights" into
# /dev/shm the way a deployment that copies a model to RAM does, maps them, and waits. Its
# command line is whatever the test gives it (python3 -m sglang.launch_server ...), so the
# probe sees a realistic process holding real shared-memory files.
#
# Environment:
#   GT_SHM_DIR     directory under /dev/shm to create (e.g. /dev/shm/Qwen3.6-27B)
#   GT_SHM_FILES   number of weight files (default 2)
#   GT_SHM_BYTES   bytes per file (default 1 MiB)
#   GT_DELETE      "1": rm the weight files after mapping, as the operator did, as the server's
#                  own user; the directory stays (its own: only it and root could have
#                  emptied it, which is what makes the deletion strong evidence)
#   GT_CHILDREN    number of spawned worker processes (multiprocessing "spawn", like TP ranks)
#   GT_ZOMBIE      "1": fork a child that exits at once and is never reaped (a zombie)
#   GT_IGNORE_TERM "1": ignore SIGTERM (signal.SIG_IGN); only SIGKILL ends the server
#   GT_WORKER_TITLE process title each spawned worker sets, with %d for its rank (e.g.
#                  "VLLM::Worker_TP%d"), the way setproctitle does: the title over the argv
#                  area, padded with NULs, and the same as the thread's name (comm)
#   GT_RANK_ARGV (JSON list), GT_RANKS: start GT_RANKS children with that command line
#                  ("python3 -m train ...": stand-in servers, like torchrun's ranks), in this
#                  environment without the GT_ variables
#   GT_ZOMBIE_LEADER "1": once ready, the main thread exits (SYS_exit) while another thread
#                  runs on: a zombie leader (state Z, empty command line, Threads: 2)
#   GT_READY       file to create once everything is in place: the server's PID, then the
#                  zombie's PID when there is one
import ctypes
import json
import mmap
import subprocess
import threading
import multiprocessing
import os
import signal
import sys
import time


def set_title(title):
    """Writes title over the argv area, NUL-padded, and names the thread after it, as
    setproctitle does on Linux."""
    f = open("/proc/self/stat").read()
    fields = f[f.rindex(")") + 2 :].split()
    start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
    t = title.encode()[: end - start - 1]
    ctypes.memmove(start, t + b"\0" * (end - start - len(t)), end - start)
    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(t[:15]), 0, 0, 0)  # PR_SET_NAME


def worker(rank):
    title = os.environ.get("GT_WORKER_TITLE", "")
    if title:
        set_title(title.replace("%d", str(rank)))
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    while True:
        time.sleep(3600)


def main():
    maps = []
    d = os.environ.get("GT_SHM_DIR", "")
    if d:
        os.makedirs(d, exist_ok=True)
        n = int(os.environ.get("GT_SHM_FILES", "2"))
        size = int(os.environ.get("GT_SHM_BYTES", str(1 << 20)))
        for i in range(n):
            p = os.path.join(d, "model-%05d-of-%05d.safetensors" % (i + 1, n))
            with open(p, "wb") as f:
                f.truncate(size)
            f = open(p, "r+b")
            maps.append((f, mmap.mmap(f.fileno(), size, mmap.MAP_SHARED)))
        if os.environ.get("GT_DELETE") == "1":
            for name in os.listdir(d):
                os.unlink(os.path.join(d, name))
    kids = []
    for r in range(int(os.environ.get("GT_CHILDREN", "0"))):
        ctx = multiprocessing.get_context("spawn")
        p = ctx.Process(target=worker, args=(r,), daemon=True)
        p.start()
        kids.append(p)
    ranks = []
    if os.environ.get("GT_RANK_ARGV"):
        env = {k: v for k, v in os.environ.items() if not k.startswith("GT_")}
        argv = json.loads(os.environ["GT_RANK_ARGV"])
        for _ in range(int(os.environ.get("GT_RANKS", "1"))):
            ranks.append(subprocess.Popen(argv, env=env))
    zombie = 0
    if os.environ.get("GT_ZOMBIE") == "1":
        zombie = os.fork()
        if zombie == 0:
            os._exit(0)
    ready = os.environ.get("GT_READY")
    if ready:
        with open(ready + ".tmp", "w") as f:
            f.write("%d\n" % os.getpid())
            if zombie:
                f.write("%d\n" % zombie)
        os.rename(ready + ".tmp", ready)

    def stop(*_):
        for k in kids + ranks:
            k.terminate()
        sys.exit(0)

    if os.environ.get("GT_ZOMBIE_LEADER") == "1":
        threading.Thread(target=time.sleep, args=(1 << 30,)).start()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        # SYS_exit ends this thread only (os._exit and sys.exit end the process).
        nr = {"x86_64": 60, "aarch64": 93}[os.uname().machine]
        ctypes.CDLL(None).syscall(nr, 0)

    if os.environ.get("GT_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, stop)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()

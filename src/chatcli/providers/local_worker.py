"""The local model's worker process: llama.cpp runs here, never in the process holding the history.

Started by `providers.local` as `python -m chatcli.providers.local_worker MODEL.gguf`, it speaks
JSON lines: requests on stdin, events on the protocol channel (the original stdout; the native
library's own writes to fd 1 are sent to stderr instead, so nothing it prints can corrupt the
protocol). Native code can segfault or abort; when it does, only this process dies, and the
client tells the user in one line.

Requests:  {"op": "load"}
           {"op": "chat", "id": N, "messages": [...], "max_tokens": N, "seed": N or null}
           {"op": "cancel", "id": N}      (handled at once, even while a chat is running)
Events:    {"event": "ready", "load_seconds": S, "system_info": "..."}
           {"id": N, "event": "delta", "text": "..."}      one per token, flushed
           {"id": N, "event": "done", "stop_reason": ..., "output_tokens": N}
           {"id": N, "event": "cancelled"}
           {"id": N?, "event": "error", "message": "..."}
End of stdin (the client went away) ends the worker at once.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import sys
import threading
import time

# The bundled SmolLM2's sampling; other GGUFs get the same defaults. A small model loops on itself
# without a repetition penalty. At SmolLM2's recommended temperature, 0.2, it often gave its previous
# answer again, word for word: in bench/sampling.py 11 of 216 later answers (5.1%) did, against 2 of
# 216 (0.9%) at 0.5, with the same relevance (86-89% against 86-87%) and speed (0.97-0.99x). The
# penalties cannot prevent it: llama-cpp-python applies them to the answer's own tokens, not the prompt.
TEMPERATURE = 0.5
TOP_P = 0.9
REPEAT_PENALTY = 1.3
# Every message costs its tokens plus the chat template's markers around it (at most this many),
# and the template may add a few dozen of its own (SmolLM2's adds a default system prompt).
TEMPLATE_TOKENS = 8
TEMPLATE_MARGIN = 48
# The shortest answer worth asking for when a long message leaves little room in the window.
MIN_ANSWER = 64


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def free_cores(limit: int, looks: int = 5) -> int:
    """How many of `limit` cores are free for an answer starting now: `limit` less the other
    tasks running at this instant, at least one.

    A token waits for the slowest of the threads computing it, so one thread more than there
    are free cores makes every token wait for the scheduler: with one core of two busy, two
    threads gave 6.4 tokens/s and one gave 24.5 (the bundled model, on this kind of machine).
    Linux counts the tasks running or ready to run (/proc/loadavg's fourth field); this worker,
    reading it, is one of them (the client waits on our pipe, asleep). The median of a few
    looks a millisecond apart passes over a task that only woke for a moment. The load averages
    are not used: they remember this worker's own last answer for minutes. Elsewhere, the
    1-minute load average is all there is. The count is the machine's: in a container or under
    `taskset` on a busy host it can leave cores unused (CHATCLI_LOCAL_THREADS then says how many)."""
    try:
        counts = []
        for look in range(looks):
            if look:
                time.sleep(0.001)
            with open("/proc/loadavg", "rb") as handle:
                counts.append(int(handle.read().split()[3].split(b"/")[0]) - 1)
        others = sorted(counts)[len(counts) // 2]
    except (OSError, ValueError, IndexError):
        try:
            others = round(os.getloadavg()[0])
        except (AttributeError, OSError):
            others = 0
    return max(1, min(limit, limit - others))


class Worker:
    def __init__(self, model_path: str, context_tokens: int, threads: int, out) -> None:
        self.model_path = model_path
        self.context_tokens = context_tokens
        # A number: that many threads (CHATCLI_LOCAL_THREADS). 0: as many as are free when each
        # answer starts (free_cores), up to every core this process may run on.
        self.threads = threads
        self.computing = 0  # the threads llama.cpp computes with now
        self.out = out
        self.llm = None
        self.system_info = ""
        self._abort_callback = None  # kept referenced while llama.cpp may call it
        self.requests: queue.Queue = queue.Queue()
        self.cancelled: set[int] = set()
        self.write_lock = threading.Lock()

    def emit(self, event: dict) -> None:
        line = json.dumps(event, ensure_ascii=False) + "\n"
        with self.write_lock:
            self.out.write(line.encode("utf-8"))
            self.out.flush()

    # -- stdin: requests, and cancels that must not wait behind a running chat -------------
    def read_requests(self, stream) -> None:
        for raw in stream:
            try:
                request = json.loads(raw)
            except ValueError:
                continue
            if request.get("op") == "cancel":
                if isinstance(request.get("id"), int):
                    self.cancelled.add(request["id"])
            else:
                self.requests.put(request)
        os._exit(0)  # the client went away (closed, killed): nothing here is worth finishing

    def serve(self) -> None:
        while True:
            request = self.requests.get()
            op, rid = request.get("op"), request.get("id")
            try:
                if op == "load":
                    self.emit({"event": "ready", **self.load()})
                elif op == "chat":
                    self.load()
                    self.chat(rid, request)
                else:
                    self.emit({"id": rid, "event": "error", "message": f"unknown request {op!r}"})
            except Refusal as exc:
                self.emit({"id": rid, "event": "error", "message": str(exc)})
            except Exception as exc:  # noqa: BLE001 - reported to the client as one line, the worker goes on
                self.emit({"id": rid, "event": "error", "message": f"generation failed: {type(exc).__name__}: {exc}"})

    # -- the model ---------------------------------------------------------------------------
    def load(self) -> dict:
        """Load the model once; later calls only say it is there."""
        started = time.perf_counter()
        if self.llm is not None:
            return {"load_seconds": 0.0, "system_info": self.system_info}
        try:
            import llama_cpp
        except ImportError:
            raise Refusal("llama-cpp-python is not installed; install the extra: pip install 'chatcli[local]'") from None
        self.computing = self.threads or free_cores(cores())
        try:
            # The prompt's batch too (llama-cpp-python's default for it is every core, whatever
            # n_threads says).
            self.llm = llama_cpp.Llama(model_path=self.model_path, n_ctx=self.context_tokens,
                                       n_threads=self.computing, n_threads_batch=self.computing, verbose=False)
        except Exception as exc:  # llama.cpp reports load failures as ValueError/RuntimeError
            raise Refusal(f"cannot load {os.path.basename(self.model_path)}: {exc}") from None
        self.system_info = _system_info()
        return {"load_seconds": time.perf_counter() - started, "system_info": self.system_info}

    def _fit_threads(self) -> None:
        """Without a set number, compute each answer on the cores free as it starts."""
        if self.threads:
            return
        wanted = free_cores(cores())
        if wanted != self.computing:
            import llama_cpp

            llama_cpp.llama_set_n_threads(self.llm.ctx, wanted, wanted)
            self.computing = wanted

    def chat(self, rid: int, request: dict) -> None:
        requested = int(request["max_tokens"])
        messages, max_tokens = fit(self.llm, request["messages"], requested, self.context_tokens)
        stop_reason = None
        produced = 0
        try:
            if rid in self.cancelled:
                self.emit({"id": rid, "event": "cancelled"})
                return
            self._abort_prompt_if_cancelled(rid)
            self._fit_threads()
            # A new seed for every answer unless one is set (CHATCLI_LOCAL_SEED): asked again, the
            # model answers afresh, as any chat does (llama-cpp-python would reuse one seed).
            seed = request.get("seed")
            chunks = self.llm.create_chat_completion(
                messages=messages, stream=True, max_tokens=max_tokens,
                temperature=TEMPERATURE, top_p=TOP_P, repeat_penalty=REPEAT_PENALTY,
                seed=seed if isinstance(seed, int) else int.from_bytes(os.urandom(4), "little") % (2**32 - 1),
            )
            try:
                for chunk in chunks:
                    if rid in self.cancelled:
                        self.emit({"id": rid, "event": "cancelled"})
                        return
                    choice = chunk["choices"][0]
                    text = choice.get("delta", {}).get("content")
                    if text:
                        if not produced:
                            self._abort_prompt_if_cancelled(None)  # from here the loop checks between tokens
                        produced += 1
                        self.emit({"id": rid, "event": "delta", "text": text})
                    stop_reason = choice.get("finish_reason") or stop_reason
            except RuntimeError:  # llama_decode aborted by the callback: the prompt was being read
                if rid not in self.cancelled:
                    raise
                self.emit({"id": rid, "event": "cancelled"})
                return
            finally:
                chunks.close()
        finally:  # a cancel that came late (or for an answer already over) is forgotten too
            self._abort_prompt_if_cancelled(None)
            for old in [other for other in list(self.cancelled) if other <= rid]:
                self.cancelled.discard(old)
        if stop_reason == "length" and max_tokens < requested:
            stop_reason = "context_window"  # the answer had only the room the message left it
        self.emit({"id": rid, "event": "done", "stop_reason": stop_reason, "output_tokens": produced})

    def _abort_prompt_if_cancelled(self, rid: int | None) -> None:
        """While answer `rid` has produced nothing, llama.cpp asks this callback between the
        steps of its computation whether to stop: a long prompt is abandoned within milliseconds
        of a cancel. It is a Python call per step (hundreds per token), so it is removed once
        text flows and the loop above checks between tokens instead (None)."""
        import llama_cpp

        if rid is None:
            if self._abort_callback is not None:
                llama_cpp.llama_set_abort_callback(self.llm.ctx, llama_cpp.ggml_abort_callback(), None)
                self._abort_callback = None  # dropped only once llama.cpp no longer holds it
            return
        callback = llama_cpp.ggml_abort_callback(lambda _data: rid in self.cancelled)
        llama_cpp.llama_set_abort_callback(self.llm.ctx, callback, None)
        self._abort_callback = callback


class Refusal(Exception):
    """A request this worker cannot serve (the model does not load, a message too long for the
    window): the client shows the text as it is, in one line."""


def _cost(llm, text: str) -> int:
    return len(llm.tokenize(text.encode("utf-8", errors="replace"), add_bos=False, special=True)) + TEMPLATE_TOKENS


def window(llm, messages: list[dict], budget: int) -> tuple[list[dict], int]:
    """Leading system messages plus the newest messages whose tokens fit in `budget` (the newest
    always), and the tokens they take. The request is shortened, never the conversation."""
    system = []
    while len(system) < len(messages) and messages[len(system)]["role"] == "system":
        system.append(messages[len(system)])
    used = sum(_cost(llm, m["content"]) for m in system)
    kept: list[dict] = []
    for message in reversed(messages[len(system):]):
        cost = _cost(llm, message["content"])
        if used + cost > budget and kept:
            break
        used += cost
        kept.append(message)
    return system + kept[::-1], used


def fit(llm, messages: list[dict], max_tokens: int, context: int) -> tuple[list[dict], int]:
    """The messages to send and the answer's length: the newest messages that fit beside a
    full-length answer; when the newest message alone leaves less room than that, the answer
    gets the room left, and a message that leaves too little is refused in one line."""
    chosen, used = window(llm, messages, context - TEMPLATE_MARGIN - max_tokens)
    room = context - TEMPLATE_MARGIN - used
    if room < MIN_ANSWER:
        most = context - TEMPLATE_MARGIN - MIN_ANSWER
        raise Refusal(f"the message is about {used:,} tokens; the local model's {context:,}-token context window "
                      f"holds at most about {most:,} beside an answer: shorten it, or use a hosted provider")
    return chosen, min(max_tokens, room)


def _system_info() -> str:
    """The CPU kernels llama.cpp was built with (AVX2, AVX512…), for `chatcli doctor`."""
    try:
        import llama_cpp

        info = llama_cpp.llama_print_system_info()
        return (info.decode() if isinstance(info, bytes) else str(info)).strip()
    except Exception:  # noqa: BLE001 - informational only
        return ""


def main(argv: list[str]) -> int:
    model_path, context_tokens, threads = argv[0], int(argv[1]), int(argv[2])
    # The protocol keeps the original stdout; fd 1 becomes stderr, so whatever the native
    # library prints lands there rather than in the middle of a JSON line.
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Ctrl-C belongs to the client (it cancels the answer); the worker runs in a session of its
    # own anyway, this is for a stray signal sent to it by hand.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = Worker(model_path, context_tokens, threads, out)
    threading.Thread(target=worker.read_requests, args=(sys.stdin.buffer,), daemon=True).start()
    worker.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

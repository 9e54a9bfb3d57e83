"""The local model in its worker process, beside the same model run in this process (run: make bench).

Rows, medians of BENCH_RUNS answers each (default 15), worker and in-process runs alternating
so that both see the same machine:
  time to first token   from the request to the first text: for a new question (its prompt is
                        processed, as in every real turn), and for the same prompt again (llama.cpp
                        reuses it, leaving little but the pipe's fixed cost)
  tokens/s              generated tokens after the first, over the time they took
  start + load          a cold start: spawn the worker until it has loaded the model, beside
                        importing llama_cpp and loading the model in this process
  Ctrl-C                from a SIGINT in the middle of an answer until the interrupt has left the
                        stream (the answer stopped), while tokens stream, and during the processing
                        of a long prompt (llama.cpp's abort callback; the worker would be killed
                        after CANCEL_GRACE and restarted on the next turn if it did not stop)

The in-process floor calls llama-cpp-python's create_chat_completion with the worker's
parameters (context, threads, sampling), which is what chatcli did before the worker existed.
The worker's overhead is the ratio of the two; the goal is under 10 %.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
MAX_TOKENS = 96
PROMPT = "Write a short paragraph about the sea."
QUESTIONS = ("Explain in a few sentences why the sky is blue ({n}).",
             "{n} apples are shared by three friends: how many does each get, and why?",
             "Describe a city you would like to visit, in about fifty words (trip {n}).",
             "Give me three tips for learning to play the guitar (lesson {n}).",
             "What happens when water freezes? Answer for a child of {n} years.")
# About 2,900 tokens: prompt processing takes long enough to cancel in the middle of it.
STORY = "Write a long story about a dragon who learns to cook, with many details."
LONG_PROMPT = "Summarise this. " + " ".join(f"Line {i} of the logbook says the wind was calm." for i in range(200))


def measure(events) -> tuple[float, float, int]:
    """(seconds to the first text, tokens per second after it, tokens) of one streamed answer."""
    start = time.perf_counter()
    first = None
    count = 0
    for text in events:
        if not text:
            continue
        count += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    rate = (count - 1) / (end - first) if first is not None and count > 1 and end > first else 0.0
    return (first or end) - start, rate, count


def worker_texts(provider, prompt: str):
    from chatcli.providers.base import Delta

    for event in provider.stream(_request(prompt)):
        if isinstance(event, Delta):
            yield event.text


def in_process_texts(llm, prompt: str):
    from chatcli.providers import local_worker

    chunks = llm.create_chat_completion(
        messages=[{"role": "user", "content": prompt}], stream=True, max_tokens=MAX_TOKENS,
        temperature=local_worker.TEMPERATURE, top_p=local_worker.TOP_P, repeat_penalty=local_worker.REPEAT_PENALTY)
    for chunk in chunks:
        yield chunk["choices"][0].get("delta", {}).get("content") or ""


def ctrl_c_seconds(provider, prompt: str, after: float) -> float:
    """Seconds from a SIGINT `after` seconds into an answer (Ctrl-C in the REPL) until the
    KeyboardInterrupt has left the stream, the answer stopped (or the worker killed)."""
    signalled: list[float] = []

    def interrupt(_signum, _frame):
        signalled.append(time.perf_counter())
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    events = provider.stream(_request(prompt, max_tokens=1024))
    try:
        signal.setitimer(signal.ITIMER_REAL, after)
        for _ in events:
            pass
        raise RuntimeError("the answer ended before the interrupt; use a longer prompt")
    except KeyboardInterrupt:
        events.close()
        return time.perf_counter() - signalled[0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _request(prompt: str, max_tokens: int = MAX_TOKENS):
    from chatcli.core.messages import Message
    from chatcli.providers.base import Request

    return Request(model="bench", messages=[Message("user", prompt)], max_tokens=max_tokens)


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    from chatcli.config.settings import Settings
    from chatcli.providers import local
    from chatcli.providers.local import CANCEL_GRACE, CONTEXT_TOKENS, LocalProvider, worker_threads

    settings = Settings.load({"HOME": os.environ.get("HOME", "/tmp"), "CHATCLI_HOME": "/tmp/chatcli-bench-local"})
    path = str(local.bundled_model_path())

    # Cold starts: the worker from spawn to loaded, and llama_cpp imported + loaded here.
    start = time.perf_counter()
    provider = LocalProvider(settings)
    provider.warm()
    worker_cold = time.perf_counter() - start
    start = time.perf_counter()
    import llama_cpp

    llm = llama_cpp.Llama(model_path=path, n_ctx=CONTEXT_TOKENS, n_threads=worker_threads(), verbose=False)
    in_process_cold = time.perf_counter() - start

    for texts in (worker_texts(provider, PROMPT), in_process_texts(llm, PROMPT)):  # the slow first answers
        measure(texts)
    fresh_w, fresh_i, again_w, again_i = [], [], [], []
    for run in range(RUNS):
        question = QUESTIONS[run % len(QUESTIONS)].format(n=run)  # new text: its prompt is processed
        fresh_w.append(measure(worker_texts(provider, question)))
        fresh_i.append(measure(in_process_texts(llm, question)))
    for _ in range(RUNS):  # the same text each time: llama.cpp reuses the processed prompt
        again_w.append(measure(worker_texts(provider, PROMPT)))
        again_i.append(measure(in_process_texts(llm, PROMPT)))

    def med(samples, index):
        return statistics.median(s[index] for s in samples)

    streaming = statistics.median(ctrl_c_seconds(provider, STORY, 1.5) for _ in range(RUNS))
    mid_prompt = []
    for _ in range(RUNS):
        provider.warm()  # should a cancel have killed the worker, the next one starts outside the timing
        mid_prompt.append(ctrl_c_seconds(provider, LONG_PROMPT, 0.1))

    print(f"\nThe local model: worker process vs in-process — median of {RUNS} answers of up to {MAX_TOKENS} tokens, "
          f"{worker_threads()} threads, Python {sys.version.split()[0]}\n")
    print("| measurement | worker | in-process (floor) | worker / floor | difference | target |")
    print("|---|---:|---:|---:|---:|---|")
    for name, worker, inproc, target in (("time to first token, a new question", fresh_w, fresh_i, "≤ 1.10×"),
                                         ("time to first token, the same prompt again (cached)", again_w, again_i,
                                          "measured: the pipe's fixed cost")):
        w, i = med(worker, 0) * 1000, med(inproc, 0) * 1000
        print(f"| {name} | {w:.1f} ms | {i:.1f} ms | {w / i:.3f}× | {w - i:+.1f} ms | {target} |")
    rate_w, rate_i = med(fresh_w + again_w, 1), med(fresh_i + again_i, 1)
    print(f"| tokens/s after the first | {rate_w:.1f} | {rate_i:.1f} | {rate_w / rate_i:.3f}× | "
          f"{rate_w - rate_i:+.1f} | ≥ 0.90× |")
    print(f"| cold start: spawn + load / import + load | {worker_cold * 1000:.0f} ms | {in_process_cold * 1000:.0f} ms "
          f"| {worker_cold / in_process_cold:.2f}× | {(worker_cold - in_process_cold) * 1000:+.0f} ms "
          "| measured (the REPL warms it while you type) |")
    print(f"| Ctrl-C while tokens stream | {streaming * 1000:.1f} ms | — | — | — | < 500 ms |")
    print(f"| Ctrl-C during prompt processing (llama.cpp aborts; a kill after {CANCEL_GRACE * 1000:.0f} ms otherwise) "
          f"| {statistics.median(mid_prompt) * 1000:.0f} ms | — | — | — | < 500 ms |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

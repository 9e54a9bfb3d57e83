"""The local model's sampling settings, measured on fixed conversations (run: make bench).

Twelve conversations of three user turns each (a greeting and two questions on different
topics; or a question, one shaped like it, and a short follow-up; poems and lists among them)
are run through llama-cpp-python's create_chat_completion as the worker calls it (the model's
own chat template, streamed, the same context), once per setting and seed. Every call has a seed of its own, so
a run can be repeated answer for answer. Figures per setting, over all its answers:

  repeat     answers (second and third turns) whose words match an earlier answer of the same
             conversation with a difflib ratio of at least REPEAT_RATIO: the answer given again
  loop       answers in which one 5-word sequence occurs at least LOOP_COUNT times
  empty      answers with no text
  relevant   answers to the second and third turns that share a content word (stopwords
             dropped, the first five letters compared) with their question, among the turns
             that have one ("Thanks!" has none): a crude check, for a setting that stops
             repeating by wandering off
  tokens/s   median over answers of the tokens after the first, over the time they took

The floor is the setting the worker ships (local_worker's constants): the table gives each
setting's repeat + loop rate and its tokens/s as ratios to it.

llama-cpp-python's repeat, frequency and presence penalties count only the tokens of the answer
being written (its last 64), never the prompt: none of them sees the previous answer, which is
why they barely move the repeat rate and temperature does.

Environment: BENCH_SEEDS (default "1,2,3"), BENCH_THREADS (default 1: one core, the machine
being shared), BENCH_MODEL (another .gguf, measured with the same
conversations), BENCH_ONLY (setting labels separated by ";", to rerun a few), BENCH_ANSWERS (a
file to write every answer to, as JSON lines, to read what the figures count).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEEDS = tuple(int(s) for s in os.environ.get("BENCH_SEEDS", "1,2,3").split(","))
THREADS = int(os.environ.get("BENCH_THREADS", "1"))
MAX_TOKENS = 120
REPEAT_RATIO = 0.9
LOOP_N, LOOP_COUNT = 5, 3

# Half open with a greeting and change topic at each turn; half ask a question shaped like the
# one before, or a short follow-up ("Thanks!", "Tell me more."): where a small model most often
# gives its previous answer again.
CONVERSATIONS = (
    ("Hi!", "What is the capital of France?", "How many legs does a spider have?"),
    ("Hello, how are you?", "Why is the sky blue?", "Write a short poem about the sea."),
    ("Good morning.", "List three fruits that are red.", "What does a bee make?"),
    ("Hey there.", "Who wrote Romeo and Juliet?", "Tell me more."),
    ("Hi.", "Give me a list of four healthy breakfast ideas.", "Why do cats purr?"),
    ("Hello!", "What is 12 times 7?", "Write a four-line poem about a cat."),
    ("What is the capital of Italy?", "And Germany?", "Thanks!"),
    ("Tell me about dogs.", "Tell me about cats.", "Thanks, that helps."),
    ("Write a haiku about autumn leaves.", "Now write one about winter snow.", "What is the largest ocean on Earth?"),
    ("List three colours.", "List three animals.", "Which one is your favourite?"),
    ("What is Python?", "What is Java?", "Which one should I learn first?"),
    ("Explain gravity in one sentence.", "Explain magnetism in one sentence.", "Who discovered electricity?"),
)

STOPWORDS = frozenset("""
a about an and are as at be by can could do does for from give have how i in is it list me my
name of on or please short tell that the this to was what when where which who why will with
write you your three four two one few some many much there here more now and thanks thank helps
hi hello hey good morning should explain sentence line make
""".split())


def settings() -> list[tuple[str, dict]]:
    """The grid, each setting a label and create_chat_completion's parameters. top_k 40 and
    min_p 0.05 are llama-cpp-python's defaults, so they are what the worker runs unless it says
    otherwise; they are written out to make the rows comparable."""
    base = {"top_p": 0.9, "top_k": 40, "min_p": 0.05}
    grid = [(f"temp {t}, repeat {r}", {**base, "temperature": t, "repeat_penalty": r})
            for t in (0.2, 0.5, 0.7) for r in (1.1, 1.3, 1.5)]
    variants = [
        ("temp 0.2, repeat 1.3, top_p only (top_k 0, min_p 0)",
         {"temperature": 0.2, "repeat_penalty": 1.3, "top_p": 0.9, "top_k": 0, "min_p": 0.0}),
        ("temp 0.5, repeat 1.3, min_p 0.1 (top_p 1, top_k 0)",
         {"temperature": 0.5, "repeat_penalty": 1.3, "top_p": 1.0, "top_k": 0, "min_p": 0.1}),
        ("temp 0.2, repeat 1.1, frequency 0.5",
         {**base, "temperature": 0.2, "repeat_penalty": 1.1, "frequency_penalty": 0.5}),
        ("temp 0.2, repeat 1.1, presence 0.5",
         {**base, "temperature": 0.2, "repeat_penalty": 1.1, "presence_penalty": 0.5}),
    ]
    rows = grid + variants
    if not any(params == shipped() for _, params in rows):
        rows.insert(0, ("shipped", shipped()))
    only = os.environ.get("BENCH_ONLY")
    if only:
        wanted = {label.strip() for label in only.split(";")}
        rows = [row for row in rows if row[0] in wanted or row[1] == shipped()]
    return rows


def shipped() -> dict:
    """The parameters the worker passes today (llama-cpp-python's defaults for what it does not)."""
    from chatcli.providers import local_worker as w

    return {"top_p": w.TOP_P, "top_k": getattr(w, "TOP_K", 40), "min_p": getattr(w, "MIN_P", 0.05),
            "temperature": w.TEMPERATURE, "repeat_penalty": w.REPEAT_PENALTY}


# -- the figures ----------------------------------------------------------------------------
def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def repeats_earlier(answer: str, earlier: list[str]) -> bool:
    mine = words(answer)
    return bool(mine) and any(difflib.SequenceMatcher(None, mine, words(e), autojunk=False).ratio() >= REPEAT_RATIO
                              for e in earlier if words(e))


def loops(answer: str) -> bool:
    mine = words(answer)
    counts: dict[tuple[str, ...], int] = {}
    for i in range(len(mine) - LOOP_N + 1):
        gram = tuple(mine[i:i + LOOP_N])
        counts[gram] = counts.get(gram, 0) + 1
        if counts[gram] >= LOOP_COUNT:
            return True
    return False


def content(text: str) -> set[str]:
    return {w[:5] for w in words(text) if len(w) > 2 and w not in STOPWORDS}


def has_content(question: str) -> bool:
    return bool(content(question))


def relevant(answer: str, question: str) -> bool:
    return bool(content(answer) & content(question))


# -- a run ----------------------------------------------------------------------------------
def answer(llm, messages: list[dict], params: dict, seed: int) -> tuple[str, float]:
    """The text of one streamed answer, and its tokens/s after the first token."""
    chunks = llm.create_chat_completion(messages=messages, stream=True, max_tokens=MAX_TOKENS, seed=seed, **params)
    parts: list[str] = []
    first = None
    for chunk in chunks:
        text = chunk["choices"][0].get("delta", {}).get("content")
        if text:
            parts.append(text)
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    rate = (len(parts) - 1) / (end - first) if first is not None and len(parts) > 1 and end > first else float("nan")
    return "".join(parts), rate


def run(llm, label: str, params: dict, dump) -> dict:
    repeat = loop = empty = rel = questions = later = total = 0
    rates: list[float] = []
    for seed in SEEDS:
        for c, turns in enumerate(CONVERSATIONS):
            messages: list[dict] = []
            earlier: list[str] = []
            for t, question in enumerate(turns):
                messages.append({"role": "user", "content": question})
                text, rate = answer(llm, messages, params, seed * 1000 + c * 10 + t)
                messages.append({"role": "assistant", "content": text})
                total += 1
                if rate == rate:
                    rates.append(rate)
                empty += not text.strip()
                loop += loops(text)
                if t > 0:
                    later += 1
                    repeat += repeats_earlier(text, earlier)
                    if has_content(question):
                        questions += 1
                        rel += relevant(text, question)
                earlier.append(text)
                if dump:
                    dump.write(json.dumps({"setting": label, "seed": seed, "conversation": c, "turn": t,
                                           "question": question, "answer": text}, ensure_ascii=False) + "\n")
    return {"label": label, "params": params, "answers": total, "later": later, "repeats": repeat, "loops": loop,
            "repeat": repeat / later, "loop": loop / total, "empty": empty / total, "relevant": rel / questions,
            "rate": statistics.median(rates) if rates else 0.0}


def print_table(title: str, results: list[dict], floor: dict) -> None:
    """Ranked by repeat + loop; ratios to the floor (the shipped setting) as bench/common.py prints them."""
    floor_bad = floor["repeat"] + floor["loop"]
    print(f"\n{title}\n")
    print("| setting | repeat | loop | repeat + loop | ratio to floor | empty | relevant | tokens/s | ratio to floor |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(results, key=lambda r: (r["repeat"] + r["loop"], -r["relevant"], -r["rate"])):
        bad = r["repeat"] + r["loop"]
        name = r["label"] + (" (floor: shipped)" if r is floor else "")
        ratio = f"{bad / floor_bad:.2f}×" if floor_bad else "—"
        print(f"| {name} | {r['repeat']:.0%} ({r['repeats']}/{r['later']}) | {r['loop']:.0%} ({r['loops']}/{r['answers']}) "
              f"| {bad:.0%} | {ratio} | {r['empty']:.0%} "
              f"| {r['relevant']:.0%} | {r['rate']:.1f} | {r['rate'] / floor['rate']:.2f}× |")


def main() -> int:
    sys.path.insert(0, str(ROOT / "src"))
    import llama_cpp

    from chatcli.providers.local import CONTEXT_TOKENS, bundled_model_path

    path = os.environ.get("BENCH_MODEL") or str(bundled_model_path())
    llm = llama_cpp.Llama(model_path=path, n_ctx=CONTEXT_TOKENS, n_threads=THREADS, verbose=False)
    answer(llm, [{"role": "user", "content": "Hello"}], shipped(), 0)  # the slow first answer after a load
    dump_path = os.environ.get("BENCH_ANSWERS")
    dump = open(dump_path, "w", encoding="utf-8") if dump_path else None  # noqa: SIM115 - closed below
    results = []
    try:
        for label, params in settings():
            started = time.perf_counter()
            results.append(run(llm, label, params, dump))
            r = results[-1]
            print(f"  {label}: repeat {r['repeat']:.0%}, loop {r['loop']:.0%}, empty {r['empty']:.0%}, "
                  f"relevant {r['relevant']:.0%}, {r['rate']:.1f} tokens/s ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    finally:
        if dump:
            dump.close()
    floor = next(r for r in results if r["params"] == shipped())
    answers = results[0]["answers"]
    print_table(f"The local model's sampling: {Path(path).name}, {len(CONVERSATIONS)} conversations × 3 turns × "
                f"{len(SEEDS)} seeds = {answers} answers per setting (up to {MAX_TOKENS} tokens), {THREADS} thread(s), "
                f"Python {sys.version.split()[0]}", results, floor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

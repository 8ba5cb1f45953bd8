"""LocalChatClient streaming throughput against raw llama-cpp-python on the same model.

Both sides stream the same prompt with the same max_tokens, temperature 0 and seed, in
the same process and run, alternating so that machine noise hits both alike. Tokens per
second = generated tokens / wall time of the whole streamed request (prompt included).
Figures use the median time of the paired runs: on a machine shared with other work the
best-of figure swings by 15% from run to run, the median of alternating pairs does not.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from _harness import Row, peer_version
from cantata.core import Message
from cantata.models import ChatOptions, ChatResponse, LocalChatClient
from cantata.models._llama_model import default_model_path, import_llama_cpp

PROMPT = "Write a short story about a lighthouse keeper and a storm."
SEED = 7


async def _ours(client: LocalChatClient, max_tokens: int) -> tuple[float, str, int]:
    options = ChatOptions(max_tokens=max_tokens, temperature=0.0, seed=SEED)
    start = time.perf_counter()
    updates = [
        u async for u in client.get_streaming_response([Message("user", PROMPT)], options=options)
    ]
    elapsed = time.perf_counter() - start
    response = ChatResponse.from_updates(updates)
    tokens = response.usage.output_tokens if response.usage else 0
    return elapsed, response.text, tokens


def _raw(llama: Any, max_tokens: int) -> tuple[float, str]:
    start = time.perf_counter()
    pieces = []
    for chunk in llama.create_chat_completion(
        [{"role": "user", "content": PROMPT}],
        max_tokens=max_tokens,
        temperature=0.0,
        seed=SEED,
        stream=True,
    ):
        text = chunk["choices"][0]["delta"].get("content")
        if text:
            pieces.append(text)
    return time.perf_counter() - start, "".join(pieces)


async def collect(quick: bool) -> list[Row]:
    """One row: streamed tokens per second, cantata's client against raw llama-cpp-python."""
    from cantata.models import set_model_requests_allowed

    set_model_requests_allowed(True)
    max_tokens = 64
    repeat = 4 if quick else 16
    n_ctx = 2048
    client = LocalChatClient(n_ctx=n_ctx, seed=0)
    await client.load()
    llama_cpp = import_llama_cpp()
    raw_llama = llama_cpp.Llama(model_path=default_model_path(), n_ctx=n_ctx, seed=0, verbose=False)

    await _ours(client, max_tokens)  # warm-up, both sides
    _raw(raw_llama, max_tokens)
    ours_times: list[float] = []
    raw_times: list[float] = []
    tokens = 0
    same_text = True
    for n in range(repeat):
        if n % 2:  # alternate who goes first, so drifts in machine load hit both alike
            raw_elapsed, raw_text = _raw(raw_llama, max_tokens)
            elapsed, text, tokens = await _ours(client, max_tokens)
        else:
            elapsed, text, tokens = await _ours(client, max_tokens)
            raw_elapsed, raw_text = _raw(raw_llama, max_tokens)
        ours_times.append(elapsed)
        raw_times.append(raw_elapsed)
        same_text = same_text and text == raw_text
    raw_llama.close()
    return [
        Row(
            name="local model streaming",
            unit="tokens/s",
            ours=tokens / statistics.median(ours_times),
            peer=tokens / statistics.median(raw_times),
            peer_name="llama-cpp-python (raw)",
            peer_version=peer_version("llama_cpp_python"),
            goal=">= 0.9x",
            note=f"SmolLM2-135M Q4_1, {tokens} tokens, median of {repeat} alternating pairs; "
            f"identical text: {same_text}",
            extra={
                "ours_seconds": ours_times,
                "raw_seconds": raw_times,
                "tokens": tokens,
                "best_of_ratio": min(raw_times) / min(ours_times),
            },
        )
    ]

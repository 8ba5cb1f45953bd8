"""The embedded model: one stream against raw llama-cpp-python, and concurrent streams
against one stream, beside what llama.cpp itself gains from batching on this machine.

Single stream: both sides stream the same prompt with the same max_tokens, temperature 0 and
seed, in the same process and run, alternating so that machine noise hits both alike.
Tokens per second = generated tokens / wall time of the whole streamed request (prompt
included), from the median time of the paired runs.

Concurrent streams: N requests (different prompts, 64 tokens each) start together on one
`LocalChatClient`; aggregate tokens per second = all generated tokens / wall time until the
last one ends, compared with one stream measured the same way in the same run.

Beside them, two limits of llama.cpp alone on a context like the client's (no sampling, no
Python, no streaming), for B = 1, 2, 4, 8, 16, measured in the same run:
- "128 tokens in batches of B positions": 128 tokens
  of one sequence, B positions per `llama_decode`, logits of the last position of each call
  (as `Llama.eval` evaluates a prompt);
- what B streams ask for: 128 tokens in steps of one token of each of B sequences, each in
  its own KV cache, logits of every token.
`limit B / limit 1` of the second is the most B streams can gain over one here. The first
gains more from B (in every run so far), as it computes logits for one position per call,
not B, and attends over one sequence. Two more say why the second is what it is, for
B = 1, 4, 8: the same steps with every step on one thread (how a step's cost grows with B
when no other core takes part), and on the model requantized to Q4_0, a format for which
llama.cpp has batched ("repack") CPU kernels that Q4_1, the shipped file's, lacks.

Threads: llama.cpp runs a one-token step on `n_threads` and anything larger on
`n_threads_batch`. The client's defaults are one per physical core and one per logical CPU;
llama-cpp-python's are half the logical CPUs and all of them. Raw llama-cpp-python is given
the client's, so that the single-stream row compares the code, not the threads, and runs in
a process of its own (see OpenMP below). Where the
client's one-token steps do not use every CPU (SMT), part of what B streams gain is the
other CPUs, not batching; so one stream is also measured on every CPU (a client with
``n_threads=`` the CPU count; llama.cpp's limit likewise), and the concurrent rows are given
against that baseline too: the goal holds only if it holds against both. On a machine
without SMT the two baselines are the same setting.

OpenMP: llama.cpp runs a batch on an OpenMP team, and libgomp keeps a pool of workers for each
thread that has started one, for as long as that thread lives. Once it manages more threads
than there are cores, its barriers sleep instead of spinning, and every step on more than
one thread slows (see cantata/models/_batch_decoder.py). So raw llama-cpp-python runs in a
process of its own, and the limits run on a thread that ends with them, once the client has
closed: each side is measured with one pool, as a program that uses only one of them has.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from _harness import Row, peer_version
from cantata.core import Message
from cantata.models import ChatOptions, ChatResponse, LocalChatClient, ToolSpec
from cantata.models._batch_decoder import default_threads
from cantata.models._llama_model import default_model_path, import_llama_cpp

MAX_REPEAT = 5
PROMPT = "Write a short story about a lighthouse keeper and a storm."
TOPICS = ("a storm", "a ship", "a whale", "a gull", "the fog", "a letter", "a cat", "the moon")
SEED = 7
STREAMS = (1, 2, 4, 8)
LIMIT_SIZES = (1, 2, 4, 8, 16)
FORMAT_SIZES = (1, 4, 8)
N_CTX = 2048
_T = TypeVar("_T")
WEATHER = ToolSpec(
    "get_weather",
    "Current weather of a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


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


class _RawPeer:
    """Raw llama-cpp-python in a process of its own, streaming on request.

    In this process its OpenMP team would start from a second thread beside the client's
    decode thread, and libgomp, then managing more threads than cores, would make both
    sides' barriers sleep (the peer's more: it decodes one token on a team too)."""

    def __init__(self, n_threads: int, n_threads_batch: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_raw_worker, args=(child, n_threads, n_threads_batch), daemon=True
        )
        self._process.start()
        child.close()
        self._answer(120)  # loaded

    def stream(self, max_tokens: int) -> tuple[float, str]:
        self._conn.send(max_tokens)
        elapsed, text = self._answer(300)
        return float(elapsed), str(text)

    def _answer(self, timeout: float) -> Any:
        if not self._conn.poll(timeout):
            raise RuntimeError(f"raw llama-cpp-python did not answer within {timeout} s")
        answer = self._conn.recv()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send(None)
        self._process.join(30)
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()


def _raw_worker(conn: Any, n_threads: int, n_threads_batch: int) -> None:
    try:
        llama = import_llama_cpp().Llama(
            model_path=default_model_path(),
            n_ctx=N_CTX,
            seed=0,
            n_threads=n_threads,
            n_threads_batch=n_threads_batch,
            verbose=False,
        )
    except BaseException as exc:
        conn.send(RuntimeError(f"raw llama-cpp-python did not load: {exc}"))
        return
    conn.send("loaded")
    try:
        while (max_tokens := conn.recv()) is not None:
            conn.send(_raw(llama, max_tokens))
    finally:
        llama.close()


async def _stream(client: LocalChatClient, k: int) -> tuple[int, str]:
    prompt = f"Write a short story about a lighthouse keeper and {TOPICS[k % len(TOPICS)]}."
    options = ChatOptions(max_tokens=64, temperature=0.0, seed=SEED)
    updates = [
        u async for u in client.get_streaming_response([Message("user", prompt)], options=options)
    ]
    response = ChatResponse.from_updates(updates)
    return (response.usage.output_tokens if response.usage else 0), response.text


async def _streams(client: LocalChatClient, n: int) -> tuple[float, list[str]]:
    """Aggregate tokens/s of `n` concurrent streams, and their texts."""
    start = time.perf_counter()
    results = await asyncio.gather(*(_stream(client, k) for k in range(n)))
    elapsed = time.perf_counter() - start
    return sum(t for t, _ in results) / elapsed, [text for _, text in results]


async def _grammar_valid(client: LocalChatClient, n: int) -> int:
    """How many of `n` concurrent tool-call and `n` structured requests came out valid."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "legs": {"type": "integer"}},
        "required": ["name", "legs"],
    }
    calls = [
        client.get_response(
            [Message("user", f"What is the weather in city number {k}?")],
            options=ChatOptions(tools=[WEATHER], tool_choice="required", max_tokens=48, seed=k),
        )
        for k in range(n)
    ]
    shaped = [
        client.get_response(
            [Message("user", f"Describe animal number {k} as JSON.")],
            options=ChatOptions(response_format=schema, max_tokens=48, seed=k),
        )
        for k in range(n)
    ]
    results = await asyncio.gather(*calls, *shaped, return_exceptions=True)
    valid = 0
    for r in results[:n]:
        ok = isinstance(r, ChatResponse) and len(r.function_calls) == 1
        valid += ok and isinstance(r.function_calls[0].arguments.get("city"), str)
    for r in results[n:]:
        valid += isinstance(r, ChatResponse) and isinstance(r.value, dict)
    return valid


@dataclass
class _Limits:
    """llama.cpp alone, in tokens/s by batch size (see the module docstring)."""

    positions: dict[int, float]
    sequences: dict[int, float]
    one_wide: float
    one_core: dict[int, float] = field(default_factory=dict)
    """Steps of B sequences with every step on one thread: how the cost of a step grows with
    B when no second core can take part."""
    q4_0: dict[int, float] = field(default_factory=dict)
    """Steps of B sequences on the same model requantized to Q4_0, a format for which
    llama.cpp has batched ("repack") CPU kernels, on the client's threads."""


def _limits(model: Any) -> _Limits:
    """Tokens/s of llama.cpp alone: 128 tokens of one sequence evaluated B positions per call
    (the issue's wording of its limit), 128 tokens decoded B sequences' tokens per call, the
    latter for one sequence on every core, and for 1, 4 and 8 sequences on one core."""
    llama_cpp = import_llama_cpp()
    single, batched = default_threads()
    ctx = _limit_context(llama_cpp, model, single, batched)
    wide = _limit_context(llama_cpp, model, batched, batched)
    narrow = _limit_context(llama_cpp, model, 1, 1)
    batch = llama_cpp.llama_batch_init(512, 0, 1)
    try:
        limits = _Limits({}, {}, 0.0)
        for size in LIMIT_SIZES:
            limits.positions[size] = _positions_limit(llama_cpp, ctx, batch, size)
            limits.sequences[size] = _sequences_limit(llama_cpp, ctx, batch, size)
        limits.one_wide = _sequences_limit(llama_cpp, wide, batch, 1)
        for size in FORMAT_SIZES:
            limits.one_core[size] = _sequences_limit(llama_cpp, narrow, batch, size)
    finally:
        llama_cpp.llama_batch_free(batch)
        for context in (ctx, wide, narrow):
            llama_cpp.llama_free(context)
    return limits


def _q4_0_limits(source: str) -> dict[int, float]:
    """Steps of 1, 4 and 8 sequences on `source` requantized to Q4_0 (a temporary file)."""
    from llama_cpp._utils import suppress_stdout_stderr

    llama_cpp = import_llama_cpp()
    with tempfile.TemporaryDirectory() as folder:
        target = os.path.join(folder, "q4_0.gguf")
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0
        params.allow_requantize = True
        params.nthread = default_threads()[1]
        with suppress_stdout_stderr(disable=False):  # it logs every tensor
            failed = llama_cpp.llama_model_quantize(
                source.encode(), target.encode(), ctypes.byref(params)
            )
        if failed:
            raise RuntimeError("llama.cpp could not requantize the model to Q4_0")
        llama = llama_cpp.Llama(model_path=target, n_ctx=512, seed=0, verbose=False)
        try:
            ctx = _limit_context(llama_cpp, llama.model, *default_threads())
            batch = llama_cpp.llama_batch_init(512, 0, 1)
            try:
                return {n: _sequences_limit(llama_cpp, ctx, batch, n) for n in FORMAT_SIZES}
            finally:
                llama_cpp.llama_batch_free(batch)
                llama_cpp.llama_free(ctx)
        finally:
            llama.close()


def _limit_context(llama_cpp: Any, model: Any, n_threads: int, n_threads_batch: int) -> Any:
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = 512 * max(LIMIT_SIZES)
    params.n_batch = params.n_ubatch = 512
    params.n_seq_max = max(LIMIT_SIZES)
    params.kv_unified = False
    params.n_threads, params.n_threads_batch = n_threads, n_threads_batch
    params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
    ctx = llama_cpp.llama_init_from_model(model, params)
    if not ctx:
        raise RuntimeError("llama.cpp could not create a context for the limit")
    return ctx


def _put(batch: Any, i: int, token: int, pos: int, seq: int, logits: bool) -> None:
    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
    batch.seq_id[i][0], batch.logits[i] = seq, logits


def _decode(llama_cpp: Any, ctx: Any, batch: Any, n: int) -> None:
    batch.n_tokens = n
    if llama_cpp.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed while measuring the limit")
    llama_cpp.llama_synchronize(ctx)


def _positions_limit(llama_cpp: Any, ctx: Any, batch: Any, size: int) -> float:
    """128 tokens of one sequence, `size` positions per llama_decode, logits of the last of
    each call (as `llama_batch_get_one` and `Llama.eval` evaluate a prompt)."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    start = time.perf_counter()
    for first in range(0, 128, size):
        for j in range(size):
            _put(batch, j, 100 + first + j, first + j, 0, j == size - 1)
        _decode(llama_cpp, ctx, batch, size)
    return 128 / (time.perf_counter() - start)


def _sequences_limit(llama_cpp: Any, ctx: Any, batch: Any, size: int, prompt: int = 24) -> float:
    """128 tokens in steps of one token (with its logits) of each of `size` sequences, each
    after a prompt of its own: what `size` streams ask of llama.cpp."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx), True)
    for seq in range(size):
        for pos in range(prompt):
            _put(batch, seq * prompt + pos, 100 + pos, pos, seq, True)
    _decode(llama_cpp, ctx, batch, size * prompt)
    steps = 128 // size
    start = time.perf_counter()
    for step in range(steps):
        for seq in range(size):
            _put(batch, seq, 200 + step, prompt + step, seq, True)
        _decode(llama_cpp, ctx, batch, size)
    return steps * size / (time.perf_counter() - start)


async def _single_stream_row(client: LocalChatClient, quick: bool) -> Row:
    max_tokens = 64
    repeat = 4 if quick else 12
    single, batched = default_threads()
    raw = _RawPeer(single, batched)
    try:
        await _ours(client, max_tokens)  # warm-up, both sides
        raw.stream(max_tokens)
        ours_times: list[float] = []
        raw_times: list[float] = []
        tokens = 0
        same_text = True
        for n in range(repeat):
            if n % 2:  # alternate who goes first, so drifts in machine load hit both alike
                raw_elapsed, raw_text = raw.stream(max_tokens)
                elapsed, text, tokens = await _ours(client, max_tokens)
            else:
                elapsed, text, tokens = await _ours(client, max_tokens)
                raw_elapsed, raw_text = raw.stream(max_tokens)
            ours_times.append(elapsed)
            raw_times.append(raw_elapsed)
            same_text = same_text and text == raw_text
    finally:
        raw.close()
    return Row(
        name="local model streaming",
        unit="tokens/s",
        ours=tokens / statistics.median(ours_times),
        peer=tokens / statistics.median(raw_times),
        peer_name="llama-cpp-python (raw)",
        peer_version=peer_version("llama_cpp_python"),
        goal=">= 0.9x",
        note=f"SmolLM2-135M Q4_1, {tokens} tokens, median of {repeat} alternating pairs, "
        f"both on {single} thread(s) a token and {batched} a batch; "
        f"identical text: {same_text}",
        extra={"ours_seconds": ours_times, "raw_seconds": raw_times, "tokens": tokens},
    )


async def _concurrent_rates(client: LocalChatClient, quick: bool) -> dict[str, Any]:
    """Aggregate tokens/s of 1, 2, 4, 8 streams and of one stream on every core, by round."""
    rounds = 1 if quick else 3
    cores = default_threads()[1]
    await _streams(client, max(STREAMS))  # warm-up: every slot has run once
    rates: dict[int, list[float]] = {n: [] for n in STREAMS}
    wide_rates: list[float] = []
    texts: dict[int, list[str]] = {}
    async with LocalChatClient(n_ctx=N_CTX, seed=0, parallel=1, n_threads=cores) as wide:
        await _streams(wide, 1)  # warm-up
        for _ in range(rounds):
            for n in STREAMS:
                rate, texts[n] = await _streams(client, n)
                rates[n].append(rate)
            rate, wide_text = await _streams(wide, 1)
            wide_rates.append(rate)
    return {
        "rounds": rounds,
        "rates": rates,
        "wide_rates": wide_rates,
        "same": all(texts[n] == texts[max(STREAMS)][:n] for n in STREAMS),
        "same_wide": wide_text == texts[1],
        "valid": await _grammar_valid(client, 4),
    }


def _concurrent_rows(measured: dict[str, Any], limits: _Limits) -> list[Row]:
    positions, sequences, one_wide = limits.positions, limits.sequences, limits.one_wide
    rounds, rates, wide_rates = measured["rounds"], measured["rates"], measured["wide_rates"]
    same, valid = measured["same"], measured["valid"]
    cores = default_threads()[1]
    one = statistics.median(rates[1])
    best = statistics.median(wide_rates)
    rows = []
    goals = {4: ">= 1.6x", 8: ">= 2x"}
    for n in STREAMS:
        rows.append(
            Row(
                name=f"local model, {n} concurrent streams",
                unit="tokens/s",
                ours=statistics.median(rates[n]),
                peer=one,
                peer_name="cantata, 1 stream (same run)",
                goal=goals.get(n),
                headline=n in goals,
                note=f"aggregate of {n} streams of 64 tokens, median of {rounds}; every "
                f"stream's text as with fewer streams: {same}; grammar-valid under "
                f"concurrency: {valid}/8; llama.cpp limit {positions[n] / positions[1]:.2f}x "
                f"(batches of {n} positions), {sequences[n] / sequences[1]:.2f}x "
                f"({n} sequences); one stream decodes on {default_threads()[0]} thread(s), "
                f"a batch on {cores}",
                extra={"rates": rates[n]},
            )
        )
    for n in STREAMS:
        rows.append(
            Row(
                name=f"local model, {n} concurrent streams",
                unit="tokens/s",
                ours=statistics.median(rates[n]),
                peer=best,
                peer_name=f"cantata, 1 stream on {cores} threads (same run)",
                goal=goals.get(n),
                headline=n in goals,
                note=f"the same streams against one stream that decodes on every core "
                f"(n_threads={cores}; same text: {measured['same_wide']}); llama.cpp "
                f"limit {sequences[n] / one_wide:.2f}x ({n} sequences against one sequence "
                f"on {cores} threads)",
                extra={"rates": rates[n], "one_stream_rates": wide_rates},
            )
        )
    for n in LIMIT_SIZES:
        rows.append(
            Row(
                name=f"llama.cpp limit, 128 tokens in batches of {n} position{_s(n)}",
                unit="tokens/s",
                ours=positions[n],
                peer=positions[1],
                peer_name="llama.cpp, batches of 1 position (same run)",
                note="one sequence, logits of the last position of each batch (the issue "
                "measured 117, 151, 214, 271, 310 tokens/s for 1, 2, 4, 8, 16 positions)",
            )
        )
        rows.append(
            Row(
                name=f"llama.cpp limit, 128 tokens in steps of {n} sequence{_s(n)}",
                unit="tokens/s",
                ours=sequences[n],
                peer=sequences[1],
                peer_name="llama.cpp, 1 sequence (same run)",
                note=f"one token of each of {n} sequences per step, logits of every one "
                "(what concurrent streams ask of llama.cpp)",
            )
        )
    rows.append(
        Row(
            name=f"llama.cpp limit, 128 tokens of 1 sequence on {cores} threads",
            unit="tokens/s",
            ours=one_wide,
            peer=sequences[1],
            peer_name="llama.cpp, 1 sequence (same run)",
            note=f"one sequence with n_threads={cores} against the default "
            f"n_threads={default_threads()[0]} (a batch always runs on {cores})",
        )
    )
    for n in FORMAT_SIZES[1:]:
        rows.append(
            Row(
                name=f"llama.cpp limit, 128 tokens in steps of {n} sequences on 1 thread",
                unit="tokens/s",
                ours=limits.one_core[n],
                peer=limits.one_core[1],
                peer_name="llama.cpp, 1 sequence on 1 thread (same run)",
                note="every step on one thread: how much a step's cost grows with the "
                "number of sequences when no other core takes part",
            )
        )
        rows.append(
            Row(
                name=f"llama.cpp limit, 128 tokens in steps of {n} sequences, model as Q4_0",
                unit="tokens/s",
                ours=limits.q4_0[n],
                peer=limits.q4_0[1],
                peer_name="llama.cpp, 1 sequence, model as Q4_0 (same run)",
                note="the same model requantized to Q4_0, a format with llama.cpp's batched "
                f"('repack') CPU kernels, on the client's threads; 1 sequence: "
                f"{limits.q4_0[1]:.1f} tokens/s against {sequences[1]:.1f} for Q4_1",
            )
        )
    return rows


def _s(n: int) -> str:
    return "" if n == 1 else "s"


async def collect(quick: bool) -> list[Row]:
    """Single-stream speed against raw llama-cpp-python; 1, 2, 4, 8 streams and the limit."""
    from cantata.models import set_model_requests_allowed

    set_model_requests_allowed(True)
    async with LocalChatClient(n_ctx=N_CTX, seed=0, parallel=max(STREAMS)) as client:
        await client.load()
        rows = [await _single_stream_row(client, quick)]
        measured = await _concurrent_rates(client, quick)
    await _decoder_thread_ended()
    limits = _on_own_thread(_fresh_limits)
    return rows + _concurrent_rows(measured, limits)


def _on_own_thread(fn: Callable[..., _T], *args: Any) -> _T:
    """`fn(*args)` on a thread that ends with it, and with it the OpenMP pool it started."""
    out: list[_T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="bench-llama")
    thread.start()
    thread.join(600)
    if thread.is_alive():
        raise RuntimeError(f"{fn.__name__} did not finish within 600 s")
    if errors:
        raise errors[0]
    return out[0]


async def _decoder_thread_ended() -> None:
    """Wait (bounded) until the client's decode thread, and its OpenMP pool, are gone."""
    for _ in range(200):
        if not any(t.name == "cantata-decoder" for t in threading.enumerate()):
            return
        await asyncio.sleep(0.05)
    raise RuntimeError("the local decode thread did not end within 10 s of closing the client")


def _fresh_limits() -> _Limits:
    """The limits, on the same model file loaded anew (the client's is closed by now)."""
    path = default_model_path()
    llama = import_llama_cpp().Llama(model_path=path, n_ctx=512, seed=0, verbose=False)
    try:
        limits = _limits(llama.model)
    finally:
        llama.close()
    limits.q4_0 = _q4_0_limits(path)
    return limits

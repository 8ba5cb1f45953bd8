"""Continuous batching: the concurrent requests of one process decoded together on one model.

A decoder owns a llama.cpp context with `parallel` sequence slots. Each of its turns
admits waiting requests into free slots, puts one token of every decoding sequence and a
chunk of every new prompt into one batch, decodes it, and samples each sequence with its own
chain. A request joins the batch when it arrives and leaves when it ends; stop strings, max
tokens, grammars and cancellation are per sequence.

Each slot has a KV cache of its own of `n_ctx` cells (llama.cpp's non-unified cache), for two
reasons: a sequence's attention then runs over its own cells in the same order as when it
runs alone, so a request's output does not depend on what else is decoding (with one shared
cache the summation order changes and greedy answers can flip); and attention costs what
the sequence's own context costs, not that of every cached conversation. A finished slot
keeps its tokens, and a new request takes the free slot whose cache shares the longest
prefix with its prompt, so a conversation that grows turn by turn evaluates only its new
tokens. (llama.cpp's CPU kernels round differently for a whole prompt and for its last few
tokens, so an answer can differ in rare near-ties between a cold and a warm cache, exactly
as with raw llama-cpp-python's own prompt cache.)

Every decoder of the process runs its steps on one thread, `_LOOP`. llama.cpp's CPU backend
runs a batch on an OpenMP team, and each thread that starts a team keeps a pool of worker
threads. Once libgomp manages more threads than there are cores, it stops spinning in its
barriers and sleeps in the kernel instead, several hundred times a step: a second decoder
thread made every batched step of both decoders about a quarter slower on two cores. One
thread for all of them keeps one pool (and two models that decode at once take turns rather
than oversubscribing the cores). A process that starts OpenMP teams on other threads, through
llama-cpp-python directly or another library built on libgomp, still adds to the count.

A server wants that thread to give way: its event loop answers requests (a refusal, the
next token of a stream) in a few hundred microseconds, but on a machine whose cores the
decoder keeps busy, each of those waits for a time slice behind it. `set_decode_niceness`
starts the thread (and so the OpenMP workers it creates) nicer than the thread that starts
it: Linux then mostly gives the loop the core when it has work, and decoding the rest.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ..core import ConfigurationError, ModelError
from ._batch_sequence import Sequence

_log = logging.getLogger("cantata.models")
_CELL_ALIGN = 256
"""llama.cpp pads a context to this many cells; each slot gets a whole number of them."""
_IDLE_WAIT = 0.5
"""Seconds the decoder thread sleeps between checks while it has nothing to do."""


@dataclass(eq=False, slots=True)
class _Slot:
    seq_id: int
    tokens: list[int] = field(default_factory=list)
    """What this slot's sequence id holds in the KV cache."""
    owner: Sequence | None = None
    used_at: int = 0


def set_decode_niceness(increment: int) -> None:
    """Run this process's decode thread `increment` nicer (Unix `nice`, 0 to 19) than the
    thread that starts it, from the next time it starts: before the first model decodes, or
    once every model of the process has closed (its OpenMP workers are made once, by it, and
    keep the niceness they were made with). `cantata serve` sets 10, so that requests are
    answered before decoding goes on. 0 (the default) leaves it as any thread.

    Only Linux keeps a niceness per thread; elsewhere it is ignored."""
    if type(increment) is not int or not 0 <= increment <= 19:
        raise ConfigurationError(
            f"the decode niceness must be a whole number from 0 to 19, got {increment!r}"
        )
    _LOOP.niceness = increment


def default_threads() -> tuple[int, int]:
    """Threads for one-token steps and for larger batches: one per physical core, as
    llama.cpp's own tools choose, and one per logical CPU.

    llama-cpp-python takes half the logical CPUs for one-token steps, a guess at the
    physical cores that is right with two-way SMT and leaves cores idle without it (a VM's
    vCPUs, say): on two cores without SMT, one stream decoded 1.4x faster on both.
    """
    cpus = _usable_cpus()
    return _physical_cores(cpus) or max(len(cpus) // 2, 1), len(cpus)


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return list(range(os.cpu_count() or 1))


def _physical_cores(cpus: list[int], root: str = "/sys/devices/system/cpu") -> int | None:
    """Distinct (package, core) pairs among `cpus`, from Linux's sysfs; None elsewhere."""
    cores = set()
    for cpu in cpus:
        topology = f"{root}/cpu{cpu}/topology/"
        try:
            with (
                open(topology + "physical_package_id") as package,
                open(topology + "core_id") as core,
            ):
                cores.add((package.read().strip(), core.read().strip()))
        except OSError:
            return None
    return len(cores) or None


class BatchDecoder:
    """Decodes the sequences submitted from any thread, together, on the process's one
    decode thread (`_LOOP`)."""

    def __init__(
        self, llama: Any, *, n_ctx: int, parallel: int, n_threads: int | None, name: str
    ) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self._llama = llama
        self._vocab = llama._model.vocab
        self.name = name
        single, batch = default_threads()
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = -(-n_ctx // _CELL_ALIGN) * _CELL_ALIGN * parallel
        params.n_batch = params.n_ubatch = min(512, n_ctx)
        params.n_seq_max = parallel
        params.kv_unified = False
        params.n_threads = n_threads or single
        params.n_threads_batch = n_threads or batch
        params.flash_attn_type = llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(llama._model.model, params)
        if not ctx:
            raise ModelError(f"llama.cpp could not create a context for {name!r} (n_ctx={n_ctx})")
        self._ctx = ctx
        self._mem = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx_seq(ctx))
        """Cells of one slot: the longest prompt plus answer a request can have."""
        self._n_batch = int(params.n_batch)
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._piece = ctypes.create_string_buffer(64)
        self._slots = [_Slot(i) for i in range(parallel)]
        self._waiting: deque[Sequence] = deque()
        self._closing = False
        self._attached = False
        self._ended = threading.Event()
        self._tick = 0

    # -- any thread -------------------------------------------------------------------

    def submit(self, seq: Sequence) -> None:
        """Queue a sequence; it joins the batch as soon as a slot and cache room are free."""
        with _LOOP.cond:
            if self._closing:
                raise ModelError(f"the local model {self.name!r} was closed; open a new client")
            self._waiting.append(seq)
            self._attached = True
            _LOOP.attach(self)

    def wake(self) -> None:
        """Look at the sequences again now (one was cancelled)."""
        with _LOOP.cond:
            _LOOP.cond.notify()

    @property
    def alive(self) -> bool:
        """False once this decoder has ended (closed, or failed) or the decode thread died."""
        if self._ended.is_set():
            return False
        return not self._attached or _LOOP.running

    def close(self, timeout: float) -> bool:
        """Stop decoding (ending every sequence) and free the context; False if it hangs."""
        with _LOOP.cond:
            self._closing = True
            attached = self._attached
            _LOOP.cond.notify()
        if not attached:
            self._end(None)
            return True
        return self._ended.wait(timeout)

    # -- the decode thread ------------------------------------------------------------

    def _ready(self) -> bool:
        """Admit what fits; whether any sequence is in the batch (`_LOOP.cond` held)."""
        self._admit()
        return any(s.owner is not None for s in self._slots)

    def _end(self, error: BaseException | None) -> None:
        """End every sequence (with `error`, if the decoder failed) and free the context."""
        try:
            with _LOOP.cond:
                self._closing = True
                waiting = list(self._waiting)
                self._waiting.clear()
            reason = ModelError(
                f"the local model {self.name!r} stopped"
                + (f" after an error: {error}" if error else " (closed)")
            )
            for seq in waiting:
                if seq.cancel.is_set():
                    seq.on_end(seq.result(stopped=True), None)
                else:
                    seq.on_end(None, reason)
            for slot in self._slots:
                if slot.owner is not None:
                    stopped = slot.owner.cancel.is_set()
                    self._finish(slot.owner, stopped=stopped, error=None if stopped else reason)
        finally:
            self._free()
            self._ended.set()

    def _admit(self) -> None:
        while self._waiting:
            seq = self._waiting[0]
            if seq.cancel.is_set():
                self._waiting.popleft()
                seq.on_end(seq.result(stopped=True), None)
                continue
            free = [s for s in self._slots if s.owner is None]
            if not free:
                return
            slot, keep = self._best_slot(free, seq.prompt)
            self._waiting.popleft()
            self._start(slot, seq, keep)

    def _best_slot(self, free: list[_Slot], prompt: list[int]) -> tuple[_Slot, int]:
        def shared(slot: _Slot) -> int:
            n = 0
            for a, b in zip(slot.tokens, prompt, strict=False):
                if a != b:
                    break
                n += 1
            return max(0, min(n, len(prompt) - 1))  # evaluate one token at least, for its logits

        best = max(free, key=lambda s: (shared(s), -s.used_at))
        return best, shared(best)

    def _start(self, slot: _Slot, seq: Sequence, keep: int) -> None:
        try:
            seq.chain = seq.make_chain()
        except BaseException as exc:
            seq.on_end(None, exc)
            return
        self._forget(slot, keep)
        slot.owner = seq
        seq.slot = slot.seq_id
        seq.n_past = len(slot.tokens)

    def _forget(self, slot: _Slot, keep: int) -> None:
        """Drop the slot's cached tokens after the first `keep`."""
        if len(slot.tokens) > keep and not self._lib.llama_memory_seq_rm(
            self._mem, slot.seq_id, keep, -1
        ):
            self._lib.llama_memory_seq_rm(self._mem, slot.seq_id, -1, -1)
            keep = 0
        del slot.tokens[keep:]

    def _step(self) -> None:
        for slot in self._slots:
            if slot.owner is not None and slot.owner.cancel.is_set():
                self._finish(slot.owner, stopped=True)
        outputs, fed = self._fill_batch()
        if not fed:
            return
        rc = self._lib.llama_decode(self._ctx, self._batch)
        if rc != 0:
            self._decode_failed(rc, fed)
            return
        for seq, n in fed.items():
            seq.n_past += n
        for seq, index in outputs:
            token = seq.chain.sample(self._ctx, index)
            self._accept(seq, token)

    def _fill_batch(self) -> tuple[list[tuple[Sequence, int]], dict[Sequence, int]]:
        batch = self._batch
        n = 0
        outputs: list[tuple[Sequence, int]] = []
        fed: dict[Sequence, int] = {}
        active = [s.owner for s in self._slots if s.owner is not None]
        for seq in active:
            if seq.next_token is not None:
                self._put(n, seq.next_token, seq.n_past, seq.slot, True)
                outputs.append((seq, n))
                fed[seq] = 1
                n += 1
        for seq in active:
            room = self._n_batch - n
            if room <= 0:
                break
            if not seq.prefilling:
                continue
            chunk = seq.prompt[seq.n_past : seq.n_past + room]
            last = seq.n_past + len(chunk) == len(seq.prompt)
            for j, token in enumerate(chunk):
                self._put(n, token, seq.n_past + j, seq.slot, last and j == len(chunk) - 1)
                n += 1
            fed[seq] = len(chunk)
            if last:
                outputs.append((seq, n - 1))
        batch.n_tokens = n
        return outputs, fed

    def _put(self, i: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
        batch = self._batch
        batch.token[i] = token
        batch.pos[i] = pos
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = seq_id
        batch.logits[i] = logits

    def _accept(self, seq: Sequence, token: int) -> None:
        """Take one sampled token: end the sequence, or stream its text and go on."""
        seq.next_token = None
        if seq.criteria is not None and seq.criteria(seq.evaluated_ids(), _NO_LOGITS):
            self._finish(seq, reason="stop")
            return
        if self._lib.llama_vocab_is_eog(self._vocab, token):
            self._finish(seq, reason="stop")
            return
        seq.completion.append(token)
        piece = seq.stop.feed(self._token_bytes(token))
        if piece:
            seq.on_text(piece)
        if seq.stop.stopped:
            self._finish(seq, reason="stop")
        elif len(seq.completion) >= seq.max_tokens:
            self._finish(seq, reason="length")
        else:
            seq.next_token = token

    def _token_bytes(self, token: int) -> bytes:
        buf = self._piece
        n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._lib.llama_token_to_piece(self._vocab, token, buf, len(buf), 0, False)
        return bytes(buf.raw[:n])

    def _finish(
        self,
        seq: Sequence,
        *,
        reason: str | None = None,
        stopped: bool = False,
        error: BaseException | None = None,
    ) -> None:
        slot = self._slots[seq.slot]
        if error is None and not stopped:
            tail = seq.stop.finish()
            if tail:
                seq.on_text(tail)
        seq.finish_reason = reason
        self._tick += 1
        slot.owner = None
        slot.used_at = self._tick
        slot.tokens = seq.evaluated()
        if seq.chain is not None:
            seq.grammar_checks = (seq.chain.checked_few, seq.chain.checked_all)
            seq.chain.close()
            seq.chain = None
        seq.on_end(None if error else seq.result(stopped=stopped), error)

    def _decode_failed(self, rc: int, fed: dict[Sequence, int]) -> None:
        """llama_decode refused the batch: the sequences in it end with a ModelError."""
        error = ModelError(
            f"llama.cpp could not decode a batch of {self._batch.n_tokens} tokens on "
            f"{self.name!r} (llama_decode returned {rc}); retry, or lower parallel= "
            "if memory is short"
        )
        for seq in fed:
            self._forget(self._slots[seq.slot], 0)
            seq.n_past = 0
            self._finish(seq, error=error)
            self._slots[seq.slot].tokens = []

    def _free(self) -> None:
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx is not None:
            self._lib.llama_free(self._ctx)
            self._ctx = None


class _DecodeLoop:
    """The one thread that runs the steps of every decoder of the process, in turn."""

    def __init__(self) -> None:
        self.niceness = 0
        """How much nicer than its starter the thread starts (`set_decode_niceness`)."""
        self.reset()

    def reset(self) -> None:
        """Start empty; in a forked child, forget the parent's thread and decoders (neither
        runs there)."""
        self.cond = threading.Condition()
        """Guards every decoder's queue and closing flag, and this loop's list."""
        self._decoders: list[BatchDecoder] = []
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def attach(self, decoder: BatchDecoder) -> None:
        """Run `decoder`'s steps until it closes (call with `cond` held)."""
        if decoder not in self._decoders:
            self._decoders.append(decoder)
        if not self.running:  # none yet, or it died with its process's fork
            self._thread = threading.Thread(target=self._run, name="cantata-decoder", daemon=True)
            self._thread.start()
        self.cond.notify()

    def _run(self) -> None:
        if self.niceness:
            _be_nicer(self.niceness)
        while True:
            with self.cond:
                work = self._next_turn()
            if work is None:
                return
            busy, ending = work
            for decoder in ending:
                self._end(decoder, None)
            for decoder in busy:
                try:
                    decoder._step()
                except BaseException as exc:  # a failed decoder must not leave callers waiting
                    _log.exception("local decoder %s failed", decoder.name)
                    with self.cond:
                        self._decoders.remove(decoder)
                    self._end(decoder, exc)

    def _next_turn(self) -> tuple[list[BatchDecoder], list[BatchDecoder]] | None:
        """The decoders with a batch to step and those closing (bounded waits for either);
        None once no decoder is left, and the thread ends."""
        while True:
            busy: list[BatchDecoder] = []
            ending: list[BatchDecoder] = []
            for decoder in list(self._decoders):
                if decoder._closing:
                    self._decoders.remove(decoder)
                    ending.append(decoder)
                elif decoder._ready():
                    busy.append(decoder)
            if busy or ending:
                return busy, ending
            if not self._decoders:
                self._thread = None
                return None
            self.cond.wait(_IDLE_WAIT)

    @staticmethod
    def _end(decoder: BatchDecoder, error: BaseException | None) -> None:
        try:
            decoder._end(error)
        except BaseException:  # the other decoders go on
            _log.exception("local decoder %s failed while ending", decoder.name)


def _be_nicer(increment: int) -> None:
    """Raise the calling thread's niceness by `increment` (Linux keeps it per thread, and a
    thread's new threads inherit it), up to 19; a platform without it is left alone."""
    if sys.platform != "linux":  # elsewhere a thread id is not a `setpriority` target
        return
    me = threading.get_native_id()
    try:
        niceness = min(os.getpriority(os.PRIO_PROCESS, me) + increment, 19)
        os.setpriority(os.PRIO_PROCESS, me, niceness)
    except OSError:  # not allowed (a sandbox's seccomp, say)
        _log.debug("the decode thread keeps its niceness", exc_info=True)


_LOOP = _DecodeLoop()
os.register_at_fork(after_in_child=_LOOP.reset)


_NO_LOGITS: Any = None

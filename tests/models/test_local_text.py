"""The decoder's model-free parts: streamed text cut at stop strings, sampling options, and the
evaluated tokens a stopping criterion reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cantata.core import ConfigurationError
from cantata.models._batch_decoder import _physical_cores, default_threads
from cantata.models._batch_sampling import KNOBS, sampling_from
from cantata.models._batch_sequence import Sequence, StopText


def stream(stops: list[str], chunks: list[bytes]) -> tuple[str, StopText]:
    text = StopText(stops)
    out = "".join(text.feed(c) for c in chunks)
    return out + text.finish(), text


def test_a_stop_string_split_across_tokens_never_reaches_the_caller() -> None:
    text = StopText(["<|end|>"])
    assert text.feed(b"Hello <|") == "Hello "
    assert text.feed(b"en") == ""
    assert text.feed(b"d|> more") == ""
    assert text.stopped
    assert text.finish() == ""
    assert text.text == "Hello "


def test_held_text_that_is_no_stop_is_released() -> None:
    text = StopText(["STOP"])
    assert text.feed(b"go ST") == "go "
    assert text.feed(b"AY") == "STAY"
    assert text.feed(b" S") == " "
    assert text.finish() == "S"
    assert not text.stopped


def test_a_character_split_across_tokens_is_sent_whole() -> None:
    data = "é€".encode()
    text = StopText([])
    pieces = [text.feed(data[i : i + 1]) for i in range(len(data))]
    assert pieces == ["", "é", "", "", "€"]


def test_the_earliest_stop_wins() -> None:
    out, text = stream(["b", "a"], [b"xxab"])
    assert out == "xx" and text.stopped


@given(
    st.text(min_size=0, max_size=40),
    st.lists(st.text(min_size=1, max_size=4), max_size=3),
    st.lists(st.integers(min_value=1, max_value=5), min_size=1, max_size=20),
)
def test_streamed_text_is_the_text_up_to_the_first_stop(
    text: str, stops: list[str], sizes: list[int]
) -> None:
    data = text.encode()
    chunks: list[bytes] = []
    i = 0
    while i < len(data):
        size = sizes[len(chunks) % len(sizes)]
        chunks.append(data[i : i + size])
        i += size
    cuts = [text.find(s) for s in stops if s in text]
    expected = text[: min(cuts)] if cuts else text
    out, seen = stream(stops, chunks)
    assert out == expected == seen.text


def test_unknown_sampling_options_are_named() -> None:
    with pytest.raises(ConfigurationError, match="no_such_knob"):
        sampling_from(temperature=None, top_p=None, seed=None, extra={"no_such_knob": 1})


@pytest.mark.parametrize(
    "extra",
    [{"top_k": "many"}, {"min_p": float("nan")}, {"repeat_penalty": True}, {"logit_bias": [1]}],
)
def test_malformed_sampling_options_are_configuration_errors(extra: dict[str, object]) -> None:
    with pytest.raises(ConfigurationError):
        sampling_from(temperature=None, top_p=None, seed=None, extra=extra)


def test_a_seed_must_be_an_integer() -> None:
    with pytest.raises(ConfigurationError, match="seed"):
        sampling_from(temperature=0.5, top_p=None, seed="7", extra={})  # type: ignore[arg-type]


@given(
    st.dictionaries(st.sampled_from(sorted(KNOBS)), st.one_of(st.none(), st.text(), st.floats()))
)
def test_any_extra_either_passes_or_is_a_configuration_error(extra: dict[str, object]) -> None:
    try:
        sampling = sampling_from(temperature=None, top_p=None, seed=None, extra=extra)
    except ConfigurationError:
        return
    assert all(v == v for v in sampling.floats.values())  # no NaN got through


@given(
    prompt=st.lists(st.integers(0, 50_000), min_size=1, max_size=40),
    steps=st.lists(st.integers(0, 50_000), max_size=30),
)
def test_the_evaluated_ids_follow_the_evaluated_tokens(prompt: list[int], steps: list[int]) -> None:
    seq = Sequence(prompt, len(steps), StopText([]), object, print, print)
    for n_past in range(1, len(prompt) + 1):  # prefill in any chunks
        seq.n_past = n_past
        assert seq.evaluated_ids().tolist() == seq.evaluated()
    for token in steps:  # one sampled token, then its evaluation
        seq.completion.append(token)
        assert seq.evaluated_ids().tolist() == seq.evaluated()
        seq.n_past += 1
        assert seq.evaluated_ids().tolist() == seq.evaluated()


def _topology(root: Path, cores: dict[int, tuple[int, int]]) -> None:
    for cpu, (package, core) in cores.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text(f"{package}\n")
        (folder / "core_id").write_text(f"{core}\n")


def test_one_step_thread_per_physical_core(tmp_path: Path) -> None:
    smt = tmp_path / "smt"
    _topology(smt, {0: (0, 0), 1: (0, 1), 2: (0, 0), 3: (0, 1)})  # two cores, two threads each
    assert _physical_cores([0, 1, 2, 3], str(smt)) == 2
    assert _physical_cores([0, 2], str(smt)) == 1  # both CPUs allowed are one core's threads
    flat = tmp_path / "flat"
    _topology(flat, {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)})  # no SMT, two packages
    assert _physical_cores([0, 1, 2, 3], str(flat)) == 4
    assert _physical_cores([0, 1, 5], str(flat)) is None  # no topology: the caller guesses
    single, batch = default_threads()
    assert 1 <= single <= batch

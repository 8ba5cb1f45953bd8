"""The `cantata` command: ask a model one question, or chat with it.

Both run on the embedded local model unless `--model`/`--base-url` name an
OpenAI-compatible server. Errors print as one clear line and exit non-zero.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from ..core import CantataError, Message, UsageError
from ..models import ChatClient, ChatOptions, ChatResponse
from .client_options import ClientOptions

__all__ = ["app", "main"]

T = TypeVar("T")

app = typer.Typer(
    name="cantata",
    help="cantata: agents, workflows and teams on one engine. Talk to a model from here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_WORDS = frozenset({"/exit", "/quit"})

ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Model name on an OpenAI-compatible server.")
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible server URL; the key comes from CANTATA_API_KEY or OPENAI_API_KEY.",
    ),
]
ModelPathOpt = Annotated[
    str | None, typer.Option("--model-path", help="A GGUF file to run locally instead.")
]
SystemOpt = Annotated[str | None, typer.Option("--system", "-s", help="System instructions.")]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="Most tokens per answer.")
]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", "-t", min=0.0, help="Sampling temperature.")
]


def _out() -> Console:
    return Console(highlight=False, soft_wrap=True)


def _err() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _run(work: Callable[[], T]) -> T:
    """Run a command body; a cantata error becomes one red line and exit code 1."""
    try:
        return work()
    except CantataError as exc:
        _err().print(f"[bold red]error:[/] {type(exc).__name__}: {exc}", markup=True)
        raise typer.Exit(1) from None


async def _stream(
    client: ChatClient, messages: list[Message], options: ChatOptions, out: Console
) -> ChatResponse:
    updates = []
    async for update in client.get_streaming_response(messages, options=options):
        updates.append(update)
        if update.text:
            out.print(update.text, end="", markup=False)
    out.print()
    return ChatResponse.from_updates(updates)


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="What to ask; '-' reads it from stdin.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_path: ModelPathOpt = None,
    system: SystemOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
) -> None:
    """Ask one question; the answer streams to the terminal."""
    flags = ClientOptions(
        model=model,
        base_url=base_url,
        model_path=model_path,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
    )

    def work() -> None:
        client = flags.client()
        text = sys.stdin.read().strip() if question == "-" else question
        if not text:
            raise UsageError("the question is empty; pass it as an argument or on stdin")
        messages = [*_start(flags.system), Message("user", text)]
        asyncio.run(_stream(client, messages, flags.chat_options(), _out()))

    try:
        _run(work)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


@app.command()
def chat(
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_path: ModelPathOpt = None,
    system: SystemOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
) -> None:
    """Talk with the model; it remembers the conversation. Leave with /exit, Ctrl-D or Ctrl-C."""
    flags = ClientOptions(
        model=model,
        base_url=base_url,
        model_path=model_path,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
    )
    _run(lambda: _chat_loop(flags))


def _chat_loop(flags: ClientOptions) -> None:
    client = flags.client()
    out = _out()
    history = _start(flags.system)
    out.print("[dim]cantata chat: /exit, Ctrl-D or Ctrl-C to leave[/]")
    with asyncio.Runner() as runner:
        while True:
            try:
                text = out.input("[bold green]you>[/] ").strip()
            except (EOFError, KeyboardInterrupt):
                out.print()
                return
            if text in EXIT_WORDS:
                return
            if not text:
                continue
            history.append(Message("user", text))
            out.print("[bold blue]model>[/] ", end="")
            try:
                response = runner.run(_stream(client, history, flags.chat_options(), out))
            except KeyboardInterrupt:
                out.print()
                return
            history.extend(response.messages)


def _start(system: str | None) -> list[Message]:
    return [Message("system", system)] if system else []


def main() -> None:
    """Entry point of the `cantata` console script."""
    app()

"""The `cantata` command: ask a model one question, or chat with it; run a spec
(`cantata run`), serve a spec or module:object over HTTP (`cantata serve`), print the spec
schema (`cantata schema`), evaluate on a dataset (`cantata eval`).

`ask` and `chat` run on the embedded local model unless `--model` names another
(``provider:model``) or `--base-url` an OpenAI-compatible server. Every failure prints as
one line that says what to do and exits non-zero; `--debug` adds the traceback.

`ask` and `chat` repeat their option list and the `ClientOptions` built from it on
purpose: typer reads each command's options from its own signature.
"""

from __future__ import annotations

import asyncio
import math
import sys
from typing import Annotated

import typer

from .. import __version__
from ..core import Message, UsageError
from ..models import ChatClient
from .answer import close_client, load_model, quiet_loop_errors, stream_answer
from .chat_session import EXIT_WORDS, ChatSession
from .client_options import ClientOptions
from .console import err, out, read_stdin, run_body
from .eval import eval_command
from .failure import report
from .run import run_command
from .schema import schema_command
from .serve import serve_command

__all__ = ["EXIT_WORDS", "app", "main"]

app = typer.Typer(
    name="cantata",
    help="cantata: agents, workflows and teams on one engine. Talk to a model from here.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_MAX_TEMPERATURE = 2.0


def _finite_temperature(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a number between 0 and {_MAX_TEMPERATURE}")
    return value


ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="provider:model (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:llama3.2, "
        "local, openai-compatible:URL#model; see docs/models.md), or a model name on --base-url.",
    ),
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
    int | None,
    typer.Option("--max-tokens", min=1, max=1_000_000, help="Most tokens per answer."),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        "-t",
        min=0.0,
        max=_MAX_TEMPERATURE,
        callback=_finite_temperature,
        help="Sampling temperature, 0 to 2.",
    ),
]
DebugOpt = Annotated[
    bool, typer.Option("--debug", help="Show the traceback of a failure, not just its line.")
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Log what cantata does (DEBUG) to stderr.")
]


CLIENT_FLAGS = frozenset(
    {"--model", "--base-url", "--model-path", "--system", "--max-tokens", "--temperature"}
)
"""The model options of `ask` and `chat`: the flags their error lines may name."""


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"cantata {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """cantata: agents, workflows and teams on one engine. Talk to a model from here."""


@app.command()
def ask(
    question: Annotated[str, typer.Argument(help="What to ask; '-' reads it from stdin.")],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_path: ModelPathOpt = None,
    system: SystemOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    debug: DebugOpt = False,
    verbose: VerboseOpt = False,
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
        text = (read_stdin() if question == "-" else question).strip()
        if not text:
            raise UsageError("the question is empty; pass it as an argument or on stdin")
        client = flags.client()
        messages = [*_start(flags.system), Message("user", text)]
        with asyncio.Runner() as runner:
            quiet_loop_errors(runner.get_loop(), debug=debug)
            runner.run(_ask(client, messages, flags))

    run_body(work, debug=debug, verbose=verbose, flags=CLIENT_FLAGS)


async def _ask(client: ChatClient, messages: list[Message], flags: ClientOptions) -> None:
    try:
        await load_model(client, err())
        await stream_answer(client, messages, flags.chat_options(), out())
    finally:
        await close_client(client)


@app.command()
def chat(
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    model_path: ModelPathOpt = None,
    system: SystemOpt = None,
    max_tokens: MaxTokensOpt = None,
    temperature: TemperatureOpt = None,
    debug: DebugOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """Talk with the model (it remembers); Ctrl-C stops an answer, /exit or Ctrl-D leaves."""
    flags = ClientOptions(
        model=model,
        base_url=base_url,
        model_path=model_path,
        system=system,
        max_tokens=max_tokens,
        temperature=temperature,
    )

    def work() -> None:
        session = ChatSession(
            flags.client(),
            flags.chat_options(),
            system=flags.system,
            out=out(),
            err=err(),
            interactive=sys.stdin.isatty(),
            debug=debug,
            flags=CLIENT_FLAGS,
        )
        session.run()

    run_body(work, debug=debug, verbose=verbose, flags=CLIENT_FLAGS)


def _start(system: str | None) -> list[Message]:
    return [Message("system", system)] if system else []


app.command(name="serve")(serve_command)
app.command(name="run")(run_command)
app.command(name="schema")(schema_command)
app.command(name="eval")(eval_command)


def main() -> None:
    """Entry point of the `cantata` console script."""
    try:
        app()
    except Exception as exc:  # outside any command (argument parsing, start-up)
        report(exc, debug="--debug" in sys.argv, console=err())
        sys.exit(1)

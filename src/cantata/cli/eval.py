"""`cantata eval`: run a dataset against an agent, team or workflow, compare two reports,
or turn recorded traffic into a dataset.

- ``cantata eval DATASET TARGET``: TARGET is a spec file (``.yaml``, ``.yml``, ``.json``,
  loaded as `cantata run` loads it) or module:object. The report prints as a table;
  ``--json`` and ``--html`` write it to files. ``--fail-under RATE`` exits 1 when the pass
  rate is lower (CI).
- ``cantata eval --compare OLD.json NEW.json``: the cases that changed; exits 1 when any
  case regressed.
- ``cantata eval --from-recording CASSETTE --out DATASET``: the exchanges a recording
  client wrote (a served app's traffic) as a dataset file (``.yaml`` or ``.jsonl``).

Record once and replay: a spec whose model is a `RecordingChatClient` writes every model
call to a cassette as the eval runs; the same spec with a `ReplayChatClient` on that file
runs the eval again offline, with no model call.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from .console import err, run_body
from .spec_options import AllowOption, SettingOption, parse_settings

__all__ = ["EVAL_FLAGS", "eval_command"]

EVAL_FLAGS = frozenset(
    {"--concurrency", "--repeats", "--timeout", "--json", "--html", "--evaluator", "--function",
     "--judge-model", "--judge-base-url", "--fail-under", "--compare", "--score-tolerance",
     "--from-recording", "--out", "--setting", "--allow", "--debug", "--verbose"}
)  # fmt: skip
"""The options of `cantata eval`: the flags its error lines may name."""

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


def eval_command(
    dataset: Annotated[
        str | None, typer.Argument(help="The dataset file (.yaml, .yml, .json or .jsonl).")
    ] = None,
    target: Annotated[
        str | None,
        typer.Argument(help="What to evaluate: a spec file, or module:object (path/file.py:obj)."),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, max=1024, help="Runs at once.")
    ] = 4,
    repeats: Annotated[
        int, typer.Option("--repeats", "-n", min=1, max=1000, help="Runs of each case.")
    ] = 1,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", min=0.001, max=86_400.0, help="Seconds one run may take."),
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the report as JSON to this file.")
    ] = None,
    html_out: Annotated[
        Path | None, typer.Option("--html", help="Write the report as one HTML page here.")
    ] = None,
    evaluator: Annotated[
        list[str] | None,
        typer.Option(
            "--evaluator",
            "-e",
            help="An evaluator for every case, as a dataset writes it: 'exact', "
            "'contains: Paris', 'max_latency: 2' (repeatable).",
        ),
    ] = None,
    function: Annotated[
        list[str] | None,
        typer.Option(
            "--function", help="module:function, a plain-function evaluator (repeatable)."
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge-model",
            help="The model of judge evaluators: 'local' (the embedded model) or a model "
            "name on --judge-base-url.",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None,
        typer.Option("--judge-base-url", help="OpenAI-compatible server of --judge-model."),
    ] = None,
    fail_under: Annotated[
        float | None,
        typer.Option("--fail-under", min=0.0, max=1.0, help="Exit 1 when the pass rate is lower."),
    ] = None,
    compare: Annotated[
        tuple[Path, Path] | None,
        typer.Option("--compare", help="Compare two reports OLD NEW; exit 1 on a regression."),
    ] = None,
    score_tolerance: Annotated[
        float,
        typer.Option(
            "--score-tolerance", min=0.0, max=1.0, help="Score drop that is no regression."
        ),
    ] = 0.0,
    from_recording: Annotated[
        Path | None,
        typer.Option(
            "--from-recording", help="A cassette (RecordingChatClient) to turn into a dataset."
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", help="The dataset file --from-recording writes.")
    ] = None,
    setting: SettingOption = None,
    allow: AllowOption = None,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of failures.")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log what cantata does (DEBUG) to stderr.")
    ] = False,
) -> None:
    """Evaluate an agent, team or workflow on a dataset; compare two reports (--compare);
    or make a dataset from recorded traffic (--from-recording)."""
    from ..core import UsageError

    code = 0

    def work() -> None:
        nonlocal code
        console = Console(highlight=False, soft_wrap=True)
        if compare is not None:
            code = _compare(compare, score_tolerance, console)
        elif from_recording is not None:
            if out is None:
                raise UsageError("--from-recording needs --out FILE (.yaml or .jsonl)")
            _from_recording(from_recording, out, err())
        else:
            if dataset is None or target is None:
                raise UsageError(
                    "give a dataset and a target (cantata eval DATASET TARGET), or --compare "
                    "OLD NEW, or --from-recording FILE --out DATASET"
                )
            report = _run(
                dataset, target, concurrency=concurrency, repeats=repeats, timeout=timeout,
                evaluators=evaluator or [], functions=function or [],
                judge=(judge_model, judge_base_url), settings=parse_settings(setting or []),
                allow=allow or [], console=console,
            )  # fmt: skip
            if json_out is not None:
                report.save(json_out)
            if html_out is not None:
                from ..evals import report_html

                html_out.parent.mkdir(parents=True, exist_ok=True)
                html_out.write_text(report_html(report), encoding="utf-8")
            if fail_under is not None and report.pass_rate < fail_under:
                err().print(
                    f"pass rate {report.pass_rate:.1%} is under --fail-under {fail_under:.1%}",
                    style="red",
                )
                code = 1

    run_body(work, debug=debug, verbose=verbose, flags=EVAL_FLAGS)
    if code:
        raise typer.Exit(code)


def _compare(paths: tuple[Path, Path], tolerance: float, console: Console) -> int:
    from ..evals import EvalReport, compare_reports, comparison_table

    old, new = (EvalReport.load(p) for p in paths)
    comparison = compare_reports(old, new, score_tolerance=tolerance)
    console.print(comparison_table(comparison))
    return 1 if comparison.has_regressions else 0


def _from_recording(cassette: Path, out: Path, console: Console) -> None:
    from ..evals import dataset_from_cassette

    data = dataset_from_cassette(cassette)
    text = data.to_jsonl() if out.suffix == ".jsonl" else data.to_yaml()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    console.print(f"{len(data)} cases written to {out}")


def _run(
    dataset_path: str,
    target_ref: str,
    *,
    concurrency: int,
    repeats: int,
    timeout: float | None,
    evaluators: list[str],
    functions: list[str],
    judge: tuple[str | None, str | None],
    settings: dict[str, str],
    allow: list[str],
    console: Console,
) -> Any:
    import yaml

    from ..core import UsageError
    from ..evals import FunctionEvaluator, evaluate, load_dataset, parse_evaluator, report_table

    extra: list[Any] = []
    for n, text in enumerate(evaluators):
        try:
            spec = yaml.safe_load(text)
        except yaml.YAMLError:
            raise UsageError(f"--evaluator {text!r} is not YAML ('contains: Paris')") from None
        extra.append(parse_evaluator(spec, where=f"--evaluator {n + 1}"))
    for ref in functions:
        fn = _load_object(ref)
        if not callable(fn):
            raise UsageError(f"--function {ref} is not a function")
        extra.append(fn if hasattr(fn, "evaluate") else FunctionEvaluator(fn))
    data = load_dataset(dataset_path)
    component = _load_component(target_ref, settings, allow)
    judge_client = _judge_client(*judge)
    tty = sys.stderr.isatty()
    done = 0

    def progress(_: Any) -> None:
        nonlocal done
        done += 1
        if tty:
            print(f"\r{done}/{len(data) * repeats}", end="", file=sys.stderr, flush=True)

    async def main() -> Any:
        try:
            return await evaluate(
                component, data, evaluators=extra, concurrency=concurrency, repeats=repeats,
                timeout=timeout, judge_client=judge_client, on_result=progress,
            )  # fmt: skip
        finally:
            closer = getattr(component, "aclose", None)
            if callable(closer):
                await closer()

    report = asyncio.run(main())
    if tty:
        print(file=sys.stderr)
    console.print(report_table(report))
    return report


def _load_object(ref: str) -> Any:
    from ..serve.served import load_target

    return load_target(ref)


def _load_component(ref: str, settings: dict[str, str], allow: list[str]) -> Any:
    """A spec file, a component config file (its top level names a ``provider``), or
    module:object."""
    if not ref.endswith(_SPEC_SUFFIXES):
        return _load_object(ref)
    import yaml

    from ..core import UsageError
    from ..declarative import from_config, load

    try:
        data = yaml.safe_load(Path(ref).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UsageError(f"the target {ref!r} cannot be read: {exc}") from None
    if isinstance(data, dict) and "provider" in data:
        return from_config(data, settings=settings, allow=allow)
    return load(ref, settings=settings, allow=allow)


def _judge_client(model: str | None, base_url: str | None) -> Any:
    from ..core import UsageError

    if model is None:
        if base_url is not None:
            raise UsageError("--judge-base-url needs --judge-model NAME")
        return None
    if model == "local" and base_url is None:
        from ..models import LocalChatClient

        return LocalChatClient()
    from ..models import OpenAIChatClient

    return OpenAIChatClient(model, base_url=base_url)

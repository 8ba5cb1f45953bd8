"""Built-in guardrails: PII, prompt injection, a JSON schema, a length bound, a model's policy.

PII is found with validated patterns, not a library: presidio needs spaCy's language
models (downloaded from a model hub at run time, which a locked-down deployment cannot
reach, and hundreds of MB), and scrubadub has had no release since 2023 and pulls in
scikit-learn and TextBlob for what are, for the kinds below, regular expressions anyway.
What a pattern finds is checked the way the number itself is: a card by Luhn's checksum
and its length, an IBAN by its country's length and the ISO 7064 mod-97 check, a US SSN by
the SSA's rules (no area 000, 666 or 9xx, no group 00, no serial 0000), so a random run
of digits is not a card. Before matching, text is folded: NFKC (fullwidth and other
compatibility forms), every Unicode decimal digit as its ASCII digit, format characters
(zero-width spaces and joiners, soft hyphens) dropped, so fullwidth digits or a zero-width
space inside an address hides nothing; a redaction still cuts the original text.

The injection check is a heuristic (phrases that try to override instructions, fake
system or role markers), on text folded the same way plus Cyrillic and Greek letters that
look Latin: it catches the common attacks, not a determined one; pair it with a
model-judged `policy_guardrail` where that matters.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from ..core import ConfigurationError, SerializationError
from ..core.bounded_json import loads_json
from .guardrails import Guardrail, GuardrailStage, Verdict

if TYPE_CHECKING:
    from ..models import ChatClient

__all__ = [
    "PII_KINDS",
    "PiiFinding",
    "PiiKind",
    "find_pii",
    "injection_guardrail",
    "length_guardrail",
    "looks_like_injection",
    "pii_guardrail",
    "policy_guardrail",
    "redact_pii",
    "schema_guardrail",
]

PiiKind: TypeAlias = Literal["email", "phone", "credit_card", "iban", "ssn"]
PII_KINDS: tuple[PiiKind, ...] = ("email", "phone", "credit_card", "iban", "ssn")

# -- folding -----------------------------------------------------------------------------


def _fold(text: str, *, lookalikes: bool = False) -> tuple[str, Sequence[int]]:
    """`text` folded for matching, and for each folded character the index of the original
    character it came from (so a match cuts the original)."""
    if text.isascii():  # the usual text: nothing to fold
        return text, range(len(text))
    out: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char.isascii():
            out.append(char)
            origin.append(index)
            continue
        if unicodedata.category(char) == "Cf":
            continue  # zero-width space, joiners, soft hyphen, bidi marks
        digit = unicodedata.digit(char, None) if char.isdecimal() else None
        if digit is not None:
            folded = str(digit)
        else:
            folded = unicodedata.normalize("NFKC", char)
            if lookalikes:
                folded = "".join(_LOOKALIKES.get(c, c) for c in folded)
        for piece in folded:
            out.append(piece)
            origin.append(index)
    return "".join(out), origin


# Cyrillic and Greek letters drawn like Latin ones (the confusables that matter for words)
_LOOKALIKES = {
    **dict(
        zip(
            "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0458\u0455\u0501\u051b\u051d\u04cf\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u0406\u0408\u0405",
            "aeopcyxijsdqwlABEKMHOPCTXIJS",
            strict=True,
        )
    ),
    **dict(
        zip(
            "\u03b1\u03bf\u03b9\u03ba\u03bd\u03c1\u03c4\u03c5\u03c7\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4\u03a5\u03a7",
            "aoikvptuxABEZHIKMNOPTYX",
            strict=True,
        )
    ),
}

# -- PII -------------------------------------------------------------------------------

_SEP = r"[ \-.]?"
_PATTERNS: dict[PiiKind, re.Pattern[str]] = {
    "email": re.compile(
        r"(?<![\w.+-])[A-Za-z0-9](?:[A-Za-z0-9._%+-]{0,62}[A-Za-z0-9])?"
        r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}(?![\w-])"
    ),
    "credit_card": re.compile(r"\d+(?:[ \-]\d+)*"),
    "iban": re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}\d{2}"),
    "ssn": re.compile(r"(?<![\d-])(\d{3})([ \-])(\d{2})\2(\d{4})(?![\d-])"),
    "phone": re.compile(
        # international (+ and a country code), North American, or a trunk-0 national number
        r"(?<![\w+])(?:\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}"
        r"|\(?\d{3}\)?[ .\-]?\d{3}[ .\-]\d{4}"
        r"|0\d{2,4}[ \-]\d{3,4}[ \-]?\d{3,4})(?![\w])"
    ),
}
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BR": 29, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20,
    "EG": 29, "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18,
    "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27,
    "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21,
    "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15,
    "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "SA": 24, "SC": 31,
    "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26,
    "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def luhn_valid(digits: str) -> bool:
    """Luhn's checksum (every payment card number passes it)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def iban_valid(text: str) -> bool:
    """An IBAN of its country's length whose ISO 7064 mod-97 check holds."""
    compact = text.replace(" ", "").upper()
    if _IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def _cards(folded: str) -> Iterator[tuple[int, int]]:
    """Spans of card numbers: in each run of digit groups (separated by one space or
    dash), the groups that together hold 13 to 19 digits, start with 2 to 6 (the card
    networks' ranges) and pass Luhn, longest first (so a digit put in front of a card hides
    nothing; a longer unseparated id is no card)."""
    for run in _PATTERNS["credit_card"].finditer(folded):
        groups = [
            (m.start() + run.start(), m.end() + run.start()) for m in _DIGITS.finditer(run.group())
        ]
        i = 0
        while i < len(groups):
            found = None
            for j in range(len(groups) - 1, i - 1, -1):
                digits = "".join(folded[a:b] for a, b in groups[i : j + 1])
                if 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn_valid(digits):
                    found = j
                    break
            if found is None:
                i += 1
                continue
            yield groups[i][0], groups[found][1]
            i = found + 1


_DIGITS = re.compile(r"\d+")


def _ibans(folded: str) -> Iterator[tuple[int, int]]:
    """Spans of IBANs: a country code, two check digits, then exactly as many letters and
    digits as that country's IBANs have (single spaces between them allowed)."""
    for start in _PATTERNS["iban"].finditer(folded):
        length = _IBAN_LENGTHS.get(folded[start.start() : start.start() + 2].upper())
        if length is None:
            continue
        chars = [folded[start.start() : start.end()]]
        end = start.end()
        while len("".join(chars)) < length and end < len(folded):
            if folded[end] == " " and end + 1 < len(folded) and folded[end + 1].isalnum():
                end += 1
            if not (folded[end].isascii() and folded[end].isalnum()):
                break
            chars.append(folded[end])
            end += 1
        candidate = "".join(chars)
        after = folded[end] if end < len(folded) else ""
        boundary = not (after.isascii() and after.isalnum())
        if len(candidate) == length and boundary and iban_valid(candidate):
            yield start.start(), end


def _ssn(match: re.Match[str]) -> bool:
    area, group, serial = match.group(1), match.group(3), match.group(4)
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _phone(match: re.Match[str]) -> bool:
    digits = sum(c.isdigit() for c in match.group())
    text = match.group()
    # a bare run of digits is no phone number, nor is an IPv4 address
    if _IPV4.fullmatch(text):
        return False
    return 9 <= digits <= 15 and (text.startswith("+") or not text.isdigit())


_IPV4 = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")


def _any(match: re.Match[str]) -> bool:
    return True


_VALID: dict[str, Callable[[re.Match[str]], bool]] = {"ssn": _ssn, "phone": _phone, "email": _any}


def _spans(kind: PiiKind, folded: str) -> Iterator[tuple[int, int]]:
    if kind == "credit_card":
        return _cards(folded)
    if kind == "iban":
        return _ibans(folded)
    check = _VALID[kind]
    return (m.span() for m in _PATTERNS[kind].finditer(folded) if check(m))


@dataclass(frozen=True, slots=True)
class PiiFinding:
    """One piece of PII: its kind and where it is in the original text."""

    kind: PiiKind
    start: int
    end: int


def find_pii(text: str, kinds: Iterable[PiiKind] = PII_KINDS) -> list[PiiFinding]:
    """The PII in `text`, by position in `text`, without overlaps (the more strictly checked
    kind wins: an email, an IBAN, a card, an SSN, then a phone number)."""
    folded, origin = _fold(text)
    found: list[PiiFinding] = []
    taken: list[tuple[int, int]] = []
    wanted = set(kinds)
    kind: PiiKind
    for kind in ("email", "iban", "credit_card", "ssn", "phone"):
        if kind not in wanted:
            continue
        for a, b in _spans(kind, folded):
            if any(a < end and start < b for start, end in taken):
                continue
            taken.append((a, b))
            found.append(PiiFinding(kind, origin[a], origin[b - 1] + 1))
    found.sort(key=lambda f: f.start)
    return found


def redact_pii(text: str, kinds: Iterable[PiiKind] = PII_KINDS) -> str:
    """`text` with each piece of PII replaced by ``[EMAIL]``, ``[CREDIT_CARD]``..."""
    out: list[str] = []
    last = 0
    for finding in find_pii(text, kinds):
        out.append(text[last : finding.start])
        out.append(f"[{finding.kind.upper()}]")
        last = finding.end
    out.append(text[last:])
    return "".join(out)


def pii_guardrail(
    *,
    action: Literal["redact", "tripwire"] = "redact",
    kinds: Iterable[PiiKind] = PII_KINDS,
    on: GuardrailStage | Iterable[GuardrailStage] = ("input", "output"),
    name: str = "pii",
) -> Guardrail:
    """A guardrail that redacts PII (``action="redact"``) or refuses text holding any
    (``"tripwire"``): emails, phone numbers, payment cards, IBANs, US SSNs."""
    chosen = tuple(kinds)
    unknown = sorted(set(chosen) - set(PII_KINDS))
    if unknown:
        raise ConfigurationError(f"unknown PII kind(s) {unknown}; use some of {list(PII_KINDS)}")
    if action not in ("redact", "tripwire"):
        raise ConfigurationError(
            f"pii_guardrail action must be 'redact' or 'tripwire', not {action!r}"
        )

    def check(text: str) -> Verdict:
        found = find_pii(text, chosen)
        if not found:
            return Verdict.passed()
        what = sorted({f.kind for f in found})
        if action == "tripwire":
            return Verdict.tripwire(f"the text holds PII: {', '.join(what)}")
        return Verdict.replace(redact_pii(text, chosen), f"redacted {', '.join(what)}")

    return Guardrail(check, name=name, on=on)


# -- prompt injection ----------------------------------------------------------------------

_INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|skip)\b(?:\W+\w+){0,4}?\W+"
    r"(?:previous|prior|above|earlier|preceding|all|any|your|the|system|original)\b"
    r"(?:\W+\w+){0,3}?\W+(?:instructions?|prompts?|rules?|directions?|guidelines?|context)\b"
    r"|\b(?:reveal|print|show|repeat|leak|output)\b(?:\W+\w+){0,3}?\W+(?:system|hidden|initial|secret)"
    r"\W+(?:prompt|instructions?|message)\b"
    r"|\byou\s+are\s+now\s+(?:in\s+)?(?:dan|developer\s+mode|jailbroken|unrestricted|no\s+longer)\b"
    r"|\b(?:jailbreak|do\s+anything\s+now|developer\s+mode\s+enabled)\b"
    r"|<\|\s*(?:im_start|im_end|system|endoftext)\s*\|>"
    r"|^\s*(?:#{2,}\s*)?(?:system|assistant)\s*(?:prompt)?\s*:"
    r"|\[/?(?:inst|system)\]",
    re.IGNORECASE | re.MULTILINE,
)


def looks_like_injection(text: str) -> str | None:
    """The phrase in `text` that tries to override the instructions, or None."""
    folded, _ = _fold(text, lookalikes=True)
    folded = re.sub(r"\s+", " ", folded.casefold())
    match = _INJECTION.search(folded)
    return match.group() if match else None


def injection_guardrail(
    *,
    on: GuardrailStage | Iterable[GuardrailStage] = ("input", "tool_result"),
    name: str = "prompt_injection",
    mode: Literal["blocking", "parallel"] = "blocking",
) -> Guardrail:
    """A guardrail that trips on text trying to override the instructions (on the input,
    and on tool results, where injected text usually arrives)."""

    def check(text: str) -> Verdict:
        found = looks_like_injection(text)
        if found is None:
            return Verdict.passed()
        return Verdict.tripwire(f"looks like a prompt injection: {found[:80]!r}")

    return Guardrail(check, name=name, on=on, mode=mode)


# -- structured output ---------------------------------------------------------------------


def schema_guardrail(
    schema: Mapping[str, Any] | type[Any],
    *,
    on: GuardrailStage | Iterable[GuardrailStage] = "output",
    name: str = "schema",
) -> Guardrail:
    """A guardrail that trips unless the text is JSON fitting `schema` (a JSON Schema, or a
    pydantic model class). JSON nested deeper than `cantata.core.MAX_JSON_DEPTH` trips."""
    if isinstance(schema, type):
        model = schema
        if not hasattr(model, "model_validate"):
            raise ConfigurationError("schema_guardrail takes a JSON Schema or a pydantic model")

        def validate(value: Any) -> str | None:
            from pydantic import ValidationError

            try:
                model.model_validate(value)
            except ValidationError as exc:
                return str(exc.errors()[0].get("msg", exc))[:200]
            return None

    else:
        try:
            import jsonschema
        except ImportError as exc:
            raise ConfigurationError(
                "schema_guardrail with a JSON Schema needs jsonschema: "
                "pip install 'cantata[guardrails]'"
            ) from exc
        try:
            validator_class = jsonschema.validators.validator_for(schema)
            validator_class.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(
                f"schema_guardrail: the schema is invalid: {exc.message}"
            ) from exc
        validator = validator_class(schema)

        def validate(value: Any) -> str | None:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
            if error is None:
                return None
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return f"{where}: {error.message[:200]}"

    def check(text: str) -> Verdict:
        try:
            value = loads_json(text)
        except SerializationError as exc:
            return Verdict.tripwire(f"not JSON: {str(exc)[:200]}")
        problem = validate(value)
        return Verdict.passed() if problem is None else Verdict.tripwire(problem)

    return Guardrail(check, name=name, on=on)


# -- length --------------------------------------------------------------------------------


def length_guardrail(
    max_chars: int,
    *,
    min_chars: int = 0,
    action: Literal["tripwire", "truncate"] = "tripwire",
    on: GuardrailStage | Iterable[GuardrailStage] = "input",
    name: str = "length",
) -> Guardrail:
    """A guardrail on the text's length in characters (code points): too long trips, or is
    cut to `max_chars` (``action="truncate"``); shorter than `min_chars` trips."""
    for label, value in (("max_chars", max_chars), ("min_chars", min_chars)):
        if type(value) is not int or value < 0:
            raise ConfigurationError(
                f"length_guardrail {label} must be a whole number, got {value!r}"
            )
    if min_chars > max_chars:
        raise ConfigurationError("length_guardrail min_chars is more than max_chars")
    if action not in ("tripwire", "truncate"):
        raise ConfigurationError("length_guardrail action must be 'tripwire' or 'truncate'")

    def check(text: str) -> Verdict:
        size = len(text)
        if size < min_chars:
            return Verdict.tripwire(f"{size} characters, fewer than {min_chars}")
        if size <= max_chars:
            return Verdict.passed()
        if action == "truncate":
            return Verdict.replace(text[:max_chars], f"cut from {size} to {max_chars} characters")
        return Verdict.tripwire(f"{size} characters, more than {max_chars}")

    return Guardrail(check, name=name, on=on)


# -- a model's judgement ---------------------------------------------------------------------

_JUDGE = (
    "You are a strict content checker. The policy is: {policy}\n"
    "Decide whether the text follows the policy. Answer with JSON: "
    '{{"verdict": "pass", "reason": "..."}} when it does, '
    '{{"verdict": "tripwire", "reason": "..."}} when it does not. Keep the reason short.'
)


def policy_guardrail(
    client: ChatClient,
    policy: str,
    *,
    on: GuardrailStage | Iterable[GuardrailStage] = "input",
    mode: Literal["blocking", "parallel"] = "blocking",
    name: str = "policy",
    max_tokens: int = 120,
) -> Guardrail:
    """A guardrail a model judges: does the text follow `policy` ("questions about our
    product only")? The model answers a verdict object through ``response_format`` (on the
    embedded model a JSON-schema grammar, so the verdict always parses)."""
    from ..models import ChatOptions
    from .chat_agent import ChatAgent

    if not isinstance(policy, str) or not policy.strip():
        raise ConfigurationError("policy_guardrail needs the policy as text")
    judge = ChatAgent(
        client,
        name=name,
        instructions=_JUDGE.format(policy=policy.strip()),
        options=ChatOptions(temperature=0.0, max_tokens=max_tokens),
    )
    return Guardrail(judge, name=name, on=on, mode=mode)

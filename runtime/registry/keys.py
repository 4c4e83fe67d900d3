"""A definition's domain idempotency key: a template over its input (DESIGN §4, §7.2).

A template is literal text (printable ASCII without spaces or braces) and at least one
``{payload.<field>}`` placeholder naming a top-level field of the event's payload, e.g.
``merge-apply:{payload.repo}:{payload.prNumber}:{payload.headSha}``. ``parse_key_template``
checks one at load; ``render_key`` fills it from a payload at planning, or answers None
when the template does not apply to that payload.
"""

import re

#: One placeholder of a key template: ``{payload.<field>}``.
KEY_PLACEHOLDER = re.compile(r"\{payload\.([A-Za-z0-9_-]+)\}")
#: What may stand between placeholders: printable ASCII, no space, no brace.
KEY_LITERAL = re.compile(r"[\x21-\x7a\x7c\x7e]*")


class KeyTemplateError(ValueError):
    """A template that is not one: the message says what is wrong with it."""


def parse_key_template(template: str) -> tuple[str, ...]:
    """The payload fields ``template`` names, in order (each once).

    Raises KeyTemplateError when the template has text that is not printable ASCII
    without spaces, a brace outside a ``{payload.<field>}`` placeholder, two placeholders
    with nothing between them, or no placeholder at all (every event of the definition would share one key).
    """
    fields: list[str] = []
    position = 0
    for match in KEY_PLACEHOLDER.finditer(template):
        _check_literal(template[position:match.start()])
        if fields and match.start() == position:
            raise KeyTemplateError(
                f"{{payload.{match.group(1)}}} follows another placeholder directly; separate them with literal "
                "text, or two inputs could share a key (repo a1 and PR 2, repo a and PR 12)"
            )
        if match.group(1) not in fields:
            fields.append(match.group(1))
        position = match.end()
    _check_literal(template[position:])
    if not fields:
        raise KeyTemplateError("it names no {payload.<field>}, so every event of the definition would share one key")
    return tuple(fields)


def _check_literal(text: str) -> None:
    if KEY_LITERAL.fullmatch(text):
        return
    if "{" in text or "}" in text:
        raise KeyTemplateError(
            f"{text!r} has a brace outside a placeholder; a placeholder is {{payload.<field>}}, a top-level field"
        )
    raise KeyTemplateError(f"{text!r} is not printable ASCII without spaces")


def key_value(value) -> str | None:
    """A payload value as it is written in a key, or None when it cannot be one.

    A non-empty string or an integer is written as it is — ``7.0`` too, as ``7``: JSON
    Schema's ``integer`` admits it, so a payload that wrote ``7.0`` must share the key of
    one that wrote ``7`` —; a non-empty list of those (``prNumbers: [7]``) is written
    joined by commas (``7``, ``7,8``). Anything else — an empty string, a boolean, a
    fractional number, an object, null — cannot key an event.
    """
    if isinstance(value, list):
        parts = [key_value(item) for item in value if not isinstance(item, list)]
        if not value or len(parts) != len(value) or None in parts:
            return None
        return ",".join(parts)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str) and value:
        return value
    return None


def render_key(template: str, payload: dict) -> str | None:
    """``template`` filled from ``payload``; None when a field it names is absent or not
    a key value (``key_value``): then the event keeps its default key (DESIGN §7.2)."""
    missing = False

    def fill(match: re.Match) -> str:
        nonlocal missing
        written = key_value(payload.get(match.group(1)))
        if written is None:
            missing = True
            return ""
        return written

    rendered = KEY_PLACEHOLDER.sub(fill, template)
    return None if missing else rendered

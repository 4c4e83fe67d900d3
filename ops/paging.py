"""The paging parameters of ``GET /schedules`` and ``schedule list``: a page number and a page
size, as the approval API names them (docs/api.md; docs/schedules.md, "Paging").

A bad value is refused, never guessed at: ``GET /schedules`` answers 400
``{error: "invalid_parameter", detail}``, the detail naming the parameter; the command exits 2.
So is a parameter a list route does not take (``?limit=10``, ``?offset=``, ``?page_size=``),
which would otherwise be ignored and answer a page the caller did not ask for, and a
parameter given twice (``?status=queued&status=failed``), of which only one would count
(``only_parameters``).
"""

from collections.abc import Iterable, Mapping

from rest_framework import exceptions

#: Loops per page when only ``?page=`` is given, as the approval API's pages.
PAGE_SIZE = 50
#: The largest page size, as the approval API's.
MAX_PAGE_SIZE = 500
#: Read by DRF's content negotiation on every route (``?format=json``), so never refused.
FORMAT_PARAMETER = "format"
#: The longest name or value a refusal quotes.
QUOTED = 40
#: The largest page number taken (past the last page is its own refusal): a bound keeps a
#: thousand-digit number from being parsed at all.
MAX_PAGE = 10**9


class InvalidParameter(exceptions.APIException):
    """400 ``invalid_parameter``: a paging parameter that is not a number in its range."""

    status_code = 400
    default_code = "invalid_parameter"


def whole_number(text: str, name: str, high: int) -> int:
    """``text`` as an integer from 1 to ``high``; ``InvalidParameter`` naming ``?name=`` otherwise
    (ASCII digits only: no sign, space or underscore). Pure."""
    if not (text.isascii() and text.isdigit() and len(text) <= len(str(high))) or not 1 <= int(text) <= high:
        raise InvalidParameter(f"?{name}= is a whole number from 1 to {high}, not {text[:QUOTED]!r}")
    return int(text)


def page_request(params: Mapping[str, str]) -> tuple[int, int] | None:
    """``(page, pageSize)`` from a request's query parameters, or None when neither is given
    (the whole list). A page size alone starts at page 1; a page alone has ``PAGE_SIZE`` loops.
    Raises ``InvalidParameter``. Pure."""
    page, size = params.get("page"), params.get("pageSize")
    if page is None and size is None:
        return None
    return (
        whole_number(page, "page", MAX_PAGE) if page is not None else 1,
        whole_number(size, "pageSize", MAX_PAGE_SIZE) if size is not None else PAGE_SIZE,
    )


def only_parameters(params: Mapping[str, str], taken: Iterable[str], route: str) -> None:
    """``InvalidParameter`` for a query parameter ``route`` does not take, or one given more than
    once: either would be an answer to another question than the one asked. Pure."""
    taken = tuple(taken)
    for name in params:
        if name not in taken and name != FORMAT_PARAMETER:
            listed = ", ".join(f"?{known}=" for known in taken)
            raise InvalidParameter(f"?{name[:QUOTED]}= is not a parameter of {route}: it takes {listed}")
        if len(params.getlist(name)) > 1:
            raise InvalidParameter(f"?{name}= is given {len(params.getlist(name))} times: give it once")

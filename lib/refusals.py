"""The base of every refusal the runtime answers with (docs/design.md §10).

A refusal is an expected "no" with a machine-readable ``code`` and a ``detail`` in words;
``status`` is the HTTP status an HTTP door answers it with, where one applies.
"""


class Refused(Exception):
    """A request, a decision or an input the runtime will not take.

    ``code`` is stable and machine-readable (``not_pending``, ``bad_signature``, …);
    ``detail`` says why in words; ``status`` is the HTTP status where one applies
    (None otherwise). Subclasses may carry more, e.g. a list of ``problems``.
    """

    status: int | None = None
    #: Whether ``str()`` starts with the code; False where the detail is the whole message
    #: an operator reads (a log line, a command's one-line failure).
    code_in_message: bool = True

    def __init__(self, code: str, detail: str, *, status: int | None = None):
        self.code = code
        self.detail = detail
        if status is not None:
            self.status = status
        super().__init__(code, detail)

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}" if self.code_in_message else self.detail

    def as_errors(self) -> list[dict]:
        """``[{code, detail}]``: the refusal as the doors' 422 ``errors`` list."""
        return [{"code": self.code, "detail": self.detail}]

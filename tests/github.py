"""GitHub deliveries as the tests send them: the vendored bodies, the repos they name, a signed POST /github,
and the ``inject`` command that replays them."""

import uuid
from io import StringIO

from django.core.management import call_command
from django.test import Client

from lib.signing import sign

from .conftest import FIXTURES_DIR

GITHUB = FIXTURES_DIR / "github"
SECRET = "github-test-secret"
#: The repositories the vendored deliveries come from; random-testing only reports.
REPOS_YAML = """
repos:
  - name: hello
    github: Codertocat/Hello-World
    base: master
  - name: playground
    github: gsmet/quarkus-bot-java-playground
    base: main
  - name: random-testing
    github: clee2000/random-testing
    base: main
    report_only: true
  - name: octo
    github: octo-org/octo-repo
    base: master
  - name: test-repo
    github: derekg1729/test-repo
    base: main
"""


def post(body: bytes, kind: str | None, *, delivery: str | None = "auto", secret: str = SECRET,
         signature: str | None = "auto", content_type: str = "application/json", client=None, **headers):
    """POST ``body`` to /github as GitHub would: signed over the exact bytes unless told otherwise."""
    sent = dict(headers)
    if kind is not None:
        sent["X-GitHub-Event"] = kind
    if delivery is not None:
        sent["X-GitHub-Delivery"] = str(uuid.uuid4()) if delivery == "auto" else delivery
    if signature is not None:
        sent["X-Hub-Signature-256"] = sign(secret, body) if signature == "auto" else signature
    # CONTENT_TYPE again as an extra: the test client drops the header of an empty body.
    return (client or Client()).post(
        "/github", data=body, content_type=content_type, headers=sent, CONTENT_TYPE=content_type,
    )


def ignored(reason: str) -> dict:
    return {"admitted": False, "ignored": True, "reason": reason}


def inject(*args) -> tuple[int, str, str]:
    """Run ``inject`` and return (exit code, stdout, stderr)."""
    out, err = StringIO(), StringIO()
    try:
        call_command("inject", *args, stdout=out, stderr=err)
    except SystemExit as exc:
        return exc.code, out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()

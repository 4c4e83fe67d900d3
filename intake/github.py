"""GitHub deliveries → ``factory.event/v1`` envelopes: the translation table of docs/intake.md.

``translate_delivery(kind, delivery_id, payload, repos, now=...)`` is one pure function:
the delivery's ``X-GitHub-Event``, ``X-GitHub-Delivery`` and parsed body, and the repos of
``config/repos.yaml``, give exactly one of

- ``Translated(envelope)`` — to admit;
- ``Ignored(reason, detail)`` — a benign non-event, answered 200 so GitHub never marks
  the hook failing: ``unhandled_event``, ``unhandled_action``, ``not_pull_request_head``,
  ``unconfigured_repo``, ``not_base_branch``, ``repo_report_only``;
- ``Malformed(errors)`` — answered 422: ``missing_delivery_id``, ``malformed_payload``,
  ``ambiguous_pull_request_head``.

The table (docs/intake.md):

=============  ================================================  ==================================
kind           condition                                         envelope
=============  ================================================  ==================================
pull_request   action opened/synchronize/ready_for_review, base  ``factory.merge.requested``,
               ref = the repo's ``base``, repo not report-only   subject + payload ``{repo}``,
                                                                 eventId = delivery id
workflow_run   completed, success, event ``pull_request``,       ``factory.merge.requested``
               exactly one PR targeting the base, repo not       ``{repo, prNumbers: [N], headSha}``,
               report-only                                       eventId ``merge-pr:<repo>:<N>:<sha>``
workflow_run   completed, failure, repo configured (report-only  ``github.workflow-run.failed``,
               included)                                         subject ``ci``, payload
                                                                 ``{repo: owner/name, runId}``
=============  ================================================  ==================================

Decisions written down in docs/intake.md: a run whose ``event`` is not
``pull_request`` or whose ``pull_requests`` is empty (a fork's pull request) is
``not_pull_request_head``; more than one PR targeting the base is
``ambiguous_pull_request_head``; a run not ``completed``, or concluded neither success nor
failure, is ``unhandled_action``; a fork's pull request is translated like any other.
A "PR targeting the base" is one whose base branch is the repo's ``base`` *in the
delivery's own repository* (GitHub lists pull requests of other repositories that share
the head commit, as the octokit ``with-pull-requests`` example shows).
"""

import re
from dataclasses import dataclass
from datetime import datetime

from lib.envelope import make_envelope
from lib.instants import InstantError, parse_instant
from runtime.registry import Repo

#: Pull-request actions that ask for a merge review (docs/intake.md); every other one —
#: closed, reopened, edited, labeled, … — is ``unhandled_action``.
PULL_REQUEST_ACTIONS = ("opened", "synchronize", "ready_for_review")
#: The only workflow_run action that carries a conclusion; requested/in_progress are ignored.
WORKFLOW_RUN_ACTIONS = ("completed",)
#: Conclusions of a completed run that translate; cancelled, skipped, timed_out,
#: neutral, action_required, stale, startup_failure are ``unhandled_action``.
WORKFLOW_RUN_CONCLUSIONS = ("success", "failure")
#: The run ``event`` whose success is a pull request's green head (docs/intake.md).
PULL_REQUEST_RUN_EVENT = "pull_request"
#: Kinds translated at all; ping, push, issues and every other kind are ``unhandled_event``.
HANDLED_KINDS = ("pull_request", "workflow_run")

SOURCE = "github"
#: What a delivery id must look like to serve as an eventId (the envelope's eventId rule).
DELIVERY_ID_PATTERN = re.compile(r"^[\x21-\x7e]{1,200}$")
HEAD_SHA_PATTERN = re.compile(r"^[0-9a-f]{40}$")
#: The largest pull-request number a delivery may carry: GitHub's own GraphQL schema types a
#: pull request's ``number`` as ``Int``, a signed 32-bit integer, so no real PR is beyond it.
MAX_PULL_REQUEST_NUMBER = 2**31 - 1
#: The largest id (``workflow_run.id``, ``repository.id``, a PR's ``base.repo.id``): GitHub's ids
#: have outgrown 32 bits (the vendored failure delivery's run id is 3206737417), so they get a
#: signed 64-bit integer's range, PostgreSQL's bigint: what a reader of 64-bit ids can hold.
MAX_GITHUB_ID = 2**63 - 1


@dataclass(frozen=True)
class Translated:
    """The delivery is an event: ``envelope`` is a complete ``factory.event/v1`` envelope."""

    envelope: dict


@dataclass(frozen=True)
class Ignored:
    """A benign non-event (200): ``reason`` is the machine-readable code, ``detail`` the words."""

    reason: str
    detail: str


@dataclass(frozen=True)
class Malformed:
    """A delivery that deserves a failure (422): ``errors`` is ``[{code, detail}]``."""

    errors: list[dict]


Translation = Translated | Ignored | Malformed


class _BadShape(Exception):
    """A field the translation needs is missing or of the wrong type (→ ``malformed_payload``)."""


def _field(document, *path: str, kind: type | tuple[type, ...]):
    """``document[path[0]][path[1]]…`` if every step is an object and the leaf has type ``kind``."""
    node = document
    for name in path:
        if not isinstance(node, dict) or name not in node:
            raise _BadShape(f"{'.'.join(path)} is missing")
        node = node[name]
    if not isinstance(node, kind) or isinstance(node, bool) and kind is not bool:
        raise _BadShape(f"{'.'.join(path)} is not {JSON_KINDS.get(kind, 'a value of the expected type')}")
    return node


#: How a ``_BadShape`` detail names the JSON type a field should have.
JSON_KINDS = {str: "a string", int: "an integer", dict: "an object", list: "an array", bool: "a boolean"}


def _bounded(document, *path: str, maximum: int, name: str | None = None) -> int:
    """The integer at ``path``, from 1 to ``maximum``. Raises ``_BadShape`` when it is missing,
    not an integer, or out of that range; ``name`` is how the detail names the field (default:
    the dotted path). A number out of range is never stored, so never reaches a bigint column,
    an idempotency key or a command."""
    value = _field(document, *path, kind=int)
    if not 1 <= value <= maximum:
        raise _BadShape(f"{name or '.'.join(path)} is not an integer from 1 to {maximum}")
    return value


def _occurred_at(document, path: tuple[str, ...], now: datetime) -> datetime:
    """The resource's ``updated_at`` as the event's occurredAt, so redeliveries are identical;
    ``now`` only when the field is missing or null. Raises ``_BadShape`` for one that is not
    an RFC 3339 instant (docs/intake.md)."""
    parent = _field(document, *path[:-1], kind=dict) if len(path) > 1 else document
    if parent.get(path[-1]) is None:
        return now
    try:
        return parse_instant(_field(document, *path, kind=str))
    except InstantError as exc:
        raise _BadShape(f"{'.'.join(path)} is not an RFC 3339 instant: {exc}") from None


def _configured(payload, repos: tuple[Repo, ...]) -> Repo | None:
    """The repo whose ``github`` is the delivery's ``repository.full_name`` (GitHub names are case-insensitive)."""
    full_name = _field(payload, "repository", "full_name", kind=str).lower()
    return next((repo for repo in repos if repo.github.lower() == full_name), None)


def _envelope(event_id: str, event_type: str, subject: str, occurred_at: datetime, payload: dict) -> dict:
    return make_envelope(
        event_id=event_id, type=event_type, source=SOURCE, subject=subject, occurred_at=occurred_at, payload=payload
    )


def _pull_request(delivery_id: str, payload: dict, repos: tuple[Repo, ...], now: datetime) -> Translation:
    action = _field(payload, "action", kind=str)
    if action not in PULL_REQUEST_ACTIONS:
        return Ignored("unhandled_action", f"pull_request action {action!r} is not one of {', '.join(PULL_REQUEST_ACTIONS)}")
    repo = _configured(payload, repos)
    if repo is None:
        return Ignored("unconfigured_repo", f"{payload['repository']['full_name']} is not in config/repos.yaml")
    if repo.report_only:
        return Ignored("repo_report_only", f"{repo.name} is report-only: merge requests never come from it")
    base = _field(payload, "pull_request", "base", "ref", kind=str)
    if base != repo.base:
        return Ignored("not_base_branch", f"the pull request targets {base!r}, not {repo.name}'s base {repo.base!r}")
    occurred_at = _occurred_at(payload, ("pull_request", "updated_at"), now)
    return Translated(_envelope(delivery_id, "factory.merge.requested", repo.name, occurred_at, {"repo": repo.name}))


def _targets_base(pull: dict, repo: Repo, repository_id: int) -> bool:
    return (
        _field(pull, "base", "ref", kind=str) == repo.base
        and _bounded(pull, "base", "repo", "id", maximum=MAX_GITHUB_ID, name="a pull request's base.repo.id") == repository_id
    )


def _pull_number(pull: dict) -> int:
    return _bounded(pull, "number", maximum=MAX_PULL_REQUEST_NUMBER, name="a pull request's number")


def _workflow_run(delivery_id: str, payload: dict, repos: tuple[Repo, ...], now: datetime) -> Translation:
    action = _field(payload, "action", kind=str)
    if action not in WORKFLOW_RUN_ACTIONS:
        return Ignored("unhandled_action", f"workflow_run action {action!r} is not completed")
    repo = _configured(payload, repos)
    run = _field(payload, "workflow_run", kind=dict)
    conclusion = run.get("conclusion")
    if repo is None:
        return Ignored("unconfigured_repo", f"{payload['repository']['full_name']} is not in config/repos.yaml")
    if conclusion not in WORKFLOW_RUN_CONCLUSIONS:
        return Ignored("unhandled_action", f"a completed run concluded {conclusion!r}: only success and failure translate")
    occurred_at = _occurred_at(run, ("updated_at",), now)
    run_id = _bounded(run, "id", maximum=MAX_GITHUB_ID, name="workflow_run.id")
    if conclusion == "failure":
        return Translated(_envelope(
            delivery_id, "github.workflow-run.failed", "ci", occurred_at, {"repo": repo.github, "runId": run_id},
        ))
    if repo.report_only:
        return Ignored("repo_report_only", f"{repo.name} is report-only: merge requests never come from it")
    event = _field(run, "event", kind=str)
    pulls = _field(run, "pull_requests", kind=list)
    if event != PULL_REQUEST_RUN_EVENT or not pulls:
        why = f"the run was triggered by {event!r}" if event != PULL_REQUEST_RUN_EVENT else (
            "the run lists no pull request (GitHub leaves the list empty for a fork's pull request)"
        )
        return Ignored("not_pull_request_head", why)
    repository_id = _bounded(payload, "repository", "id", maximum=MAX_GITHUB_ID)
    targeting = [pull for pull in pulls if _targets_base(pull, repo, repository_id)]
    if not targeting:
        return Ignored("not_base_branch", f"none of the run's pull requests targets {repo.name}'s base {repo.base!r}")
    if len(targeting) > 1:
        numbers = ", ".join(f"#{_pull_number(pull)}" for pull in targeting)
        return Malformed([{
            "code": "ambiguous_pull_request_head",
            "detail": f"pull requests {numbers} all target {repo.base!r} from this head; which one is green is unknown",
        }])
    number = _pull_number(targeting[0])
    head_sha = _field(run, "head_sha", kind=str)
    if not HEAD_SHA_PATTERN.fullmatch(head_sha):
        raise _BadShape("workflow_run.head_sha is not 40 lower-case hex digits")
    event_id = f"merge-pr:{repo.name}:{number}:{head_sha}"
    return Translated(_envelope(
        event_id, "factory.merge.requested", repo.name, occurred_at,
        {"repo": repo.name, "prNumbers": [number], "headSha": head_sha},
    ))


def translate_delivery(
    kind: str | None, delivery_id: str | None, payload, repos: tuple[Repo, ...], *, now: datetime
) -> Translation:
    """Map one GitHub delivery to an envelope, an ignore reason or a refusal (docs/intake.md).

    ``kind`` is ``X-GitHub-Event``, ``delivery_id`` is ``X-GitHub-Delivery`` (None when
    absent), ``payload`` the parsed body (any JSON value), ``repos`` the configured repos,
    ``now`` (aware) the occurredAt used only when the resource carries no ``updated_at``.
    The delivery id is required of every delivery — GitHub always sends one, so its
    absence means a proxy or a hand-made request and is worth a failure even for a ping.
    """
    if not delivery_id or not DELIVERY_ID_PATTERN.fullmatch(delivery_id):
        return Malformed([{
            "code": "missing_delivery_id",
            "detail": "X-GitHub-Delivery is required: 1–200 printable characters without spaces",
        }])
    # Before the kind: GitHub sends every delivery as an object, so another body is refused
    # whatever its kind claims, as the door's description says (docs/intake.md).
    if not isinstance(payload, dict):
        return Malformed([{"code": "malformed_payload", "detail": "a delivery body must be a JSON object"}])
    if kind not in HANDLED_KINDS:
        return Ignored("unhandled_event", f"{kind or '(no X-GitHub-Event)'} deliveries are not translated")
    try:
        if kind == "pull_request":
            return _pull_request(delivery_id, payload, repos, now)
        return _workflow_run(delivery_id, payload, repos, now)
    except _BadShape as exc:
        return Malformed([{"code": "malformed_payload", "detail": f"{kind} delivery: {exc}"}])

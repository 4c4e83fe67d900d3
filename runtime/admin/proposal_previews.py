"""A proposal's preview in the inbox: the block its page and its confirmation show, the block
alone for htmx to refresh while the preview waits or runs, and "Preview again"
(docs/web.md, "Previews"; docs/design.md §8, Previews).

The block says what the definition does (its description), then, summary first: what the dry run found, its data, its age (stale past
``FACTORY_PREVIEW_MAX_AGE_SECONDS``), or why there is none, and that the run evaluates
again when it runs. "Preview again" is for a person with the approve permission, on a
pending proposal whose definition declares a preview.
"""

import json

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode

from runtime import clock
from runtime.models import Proposal, ProposalStatus
from runtime.plan_text import what_it_does
from runtime.preview_text import definition_in_force, preview_age_seconds, preview_item, would_do
from runtime.registry import get_registry
from runtime.services.approval import APPROVE_PERMISSION
from runtime.services.previews import PreviewRefused, request_preview, waiting_previews

from .common import duration, instant

#: How often an open (waiting or running) preview's block asks for itself again, in seconds.
PREVIEW_POLL_SECONDS = 2
TEMPLATE = "admin/runtime/proposal/_preview.html"


def preview_context(request, proposal: Proposal, *, now, back: str = "", said: str = "", refused: str = "") -> dict:
    """What ``_preview.html`` shows of ``proposal``'s preview at ``now`` (the database's clock);
    ``back`` is the page "Preview again" returns to without htmx (default: the proposal's page)."""
    back = _local(request, back) or reverse("admin:runtime_proposal_change", args=[proposal.pk])
    definition = definition_in_force(proposal.definition)
    item = preview_item(proposal, waiting=waiting_previews)
    age = preview_age_seconds(item, now)
    status = item["status"] if item else None
    return {
        "proposal": proposal,
        "description": what_it_does(proposal.plan, definition.description) if definition else "",
        "preview": item,
        "would_do": would_do(item),
        "data_json": json.dumps(item["data"], indent=2, ensure_ascii=False) if item and item["data"] is not None else "",
        "age": duration(age) if age is not None else "",
        "finished": instant(proposal.preview.finished_at, relative=False) if age is not None else "",
        "stale": age is not None and age > settings.FACTORY_PREVIEW_MAX_AGE_SECONDS,
        "max_age": duration(settings.FACTORY_PREVIEW_MAX_AGE_SECONDS),
        "open": status in ("pending", "running"),
        "waiting": waiting_previews() if status == "pending" else None,
        "can_ask": (request.user.has_perm(APPROVE_PERMISSION) and proposal.status == ProposalStatus.PENDING
                    and definition is not None and definition.has_preview),
        "fragment_url": reverse("admin:runtime_proposal_preview", args=[proposal.pk]) + "?" + urlencode({"next": back}),
        "back": back,
        "ask_url": reverse("admin:runtime_proposal_preview_again", args=[proposal.pk]),
        "poll_seconds": PREVIEW_POLL_SECONDS,
        "said": said,
        "refused": refused,
    }


def preview_block(request, proposal: Proposal, *, now, back: str = "") -> str:
    """The block as HTML, for a page that includes it (``back``: as ``preview_context``)."""
    return render_to_string(TEMPLATE, preview_context(request, proposal, now=now, back=back), request=request)


def _local(request, url: str) -> str:
    """``url`` when it is a page of this site, else ""."""
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return url
    return ""


def _proposal(proposal_id: int) -> Proposal:
    proposal = Proposal.objects.select_related("event", "preview__requested_by").filter(pk=proposal_id).first()
    if proposal is None:
        raise Http404(f"no proposal {proposal_id}")
    return proposal


def preview_fragment_view(request, proposal_id: int):
    """``GET …/<id>/preview/``: the block alone (htmx refreshes it while the preview is open)."""
    proposal = _proposal(proposal_id)
    back = request.GET.get("next", "")
    return TemplateResponse(request, TEMPLATE, preview_context(request, proposal, now=clock.database_now(), back=back))


def ask_preview_view(request, proposal_id: int):
    """``POST …/<id>/preview/again/`` (the approve permission, CSRF): ask for the preview again.

    From htmx (``HX-Request``) the answer is the refreshed block, saying what happened;
    otherwise a redirect to ``next`` (a page of this site) or the proposal's page, with the
    same words as a message. A refusal (``runtime.services.previews.PreviewRefused``) is
    said, never an error page; without the permission: 403."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not request.user.has_perm(APPROVE_PERMISSION):
        raise PermissionDenied
    proposal = _proposal(proposal_id)
    now = clock.database_now()
    said = refused = ""
    try:
        request_preview(proposal_id, user=request.user, now=now, registry=get_registry(), via="admin")
        said = "Preview asked for: a worker runs the dry run within seconds; nothing changes."
    except PreviewRefused as exc:
        refused = f"Not asked: {exc.detail}."
    back = _local(request, request.POST.get("next", "")) or reverse("admin:runtime_proposal_change", args=[proposal.pk])
    if request.headers.get("HX-Request") == "true":
        fresh = _proposal(proposal_id)
        return TemplateResponse(request, TEMPLATE, preview_context(
            request, fresh, now=now, back=back, said=said, refused=refused))
    messages.add_message(request, messages.ERROR if refused else messages.SUCCESS, refused or said)
    return HttpResponseRedirect(back)

"""The JSON shapes of ``/api/`` as OpenAPI components (docs/api.md): the read commands' items
(``runtime.listing``, docs/design.md §10) and the answers. Used only to describe: the views
answer with ``runtime.listing``'s dicts, which ``tests/http/test_api.py`` compares with these."""

from rest_framework import serializers

from runtime.models import PlanningOutcome, PreviewStatus, ProposalStatus, RunStatus


class ErrorSerializer(serializers.Serializer):
    """``{error, detail}``: a refusal; ``error`` is its stable code."""

    error = serializers.CharField(help_text="machine-readable code, e.g. not_pending")
    detail = serializers.CharField(help_text="why, in words")


class ServerErrorSerializer(ErrorSerializer):
    """500 ``{error: "internal_error", detail, requestId}``: the cause is in the log under the id."""

    requestId = serializers.CharField()


class PlanningSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=PlanningOutcome.choices, allow_null=True)
    reason = serializers.CharField(allow_null=True)


class EventItemSerializer(serializers.Serializer):
    """An admitted event: the envelope (docs/design.md §3) plus how it came in and was planned."""

    schemaVersion = serializers.CharField()
    eventId = serializers.CharField()
    type = serializers.CharField()
    source = serializers.CharField()
    subject = serializers.CharField()
    occurredAt = serializers.CharField(help_text="RFC 3339, UTC")
    correlationId = serializers.CharField()
    causationId = serializers.CharField(required=False, help_text="present when a chain caused the event")
    payload = serializers.DictField()
    id = serializers.IntegerField()
    door = serializers.CharField(help_text="schedule, chain, github, events or inject")
    admittedAt = serializers.CharField(allow_null=True)
    planning = PlanningSerializer()


class PreviewSerializer(serializers.Serializer):
    """A proposal's preview: its mutating command's dry run (docs/design.md §8, Previews)."""

    status = serializers.ChoiceField(choices=PreviewStatus.choices)
    reason = serializers.CharField(allow_blank=True, help_text="why it failed or was not previewed")
    detail = serializers.CharField(allow_blank=True)
    outcome = serializers.CharField(allow_null=True, help_text="the dry run's outcome, e.g. WOULD_REAP")
    summary = serializers.CharField(allow_null=True)
    data = serializers.JSONField(allow_null=True, help_text="the result's data: what it would change")
    stdout = serializers.CharField(allow_null=True, help_text="the first 16 KB of its output")
    exitCode = serializers.IntegerField(allow_null=True)
    durationSeconds = serializers.FloatField(allow_null=True)
    requestedAt = serializers.CharField(allow_null=True)
    requestedBy = serializers.CharField(allow_null=True, help_text="the person who asked again; null: planning asked")
    startedAt = serializers.CharField(allow_null=True)
    finishedAt = serializers.CharField(allow_null=True, help_text="when it ran (ended)")
    registryDigest = serializers.CharField(allow_null=True)
    argv = serializers.ListField(child=serializers.CharField(), allow_null=True)


class ProposalItemSerializer(serializers.Serializer):
    """A proposal as ``manage.py proposals --json`` shows it."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=ProposalStatus.choices)
    eventId = serializers.CharField()
    loop = serializers.CharField(allow_null=True)
    key = serializers.CharField(allow_null=True)
    definition = serializers.CharField()
    idempotencyKey = serializers.CharField()
    plan = serializers.JSONField()
    registryDigest = serializers.CharField()
    createdAt = serializers.CharField(allow_null=True)
    actor = serializers.CharField(allow_null=True)
    decidedBy = serializers.CharField(allow_null=True)
    decidedAt = serializers.CharField(allow_null=True)
    note = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_null=True, help_text="what the definition does, in plain words")
    preview = PreviewSerializer(allow_null=True)


class RunItemSerializer(serializers.Serializer):
    """A run as ``manage.py runs --json`` shows it."""

    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    definition = serializers.CharField()
    eventId = serializers.CharField()
    loop = serializers.CharField(allow_null=True)
    key = serializers.CharField(allow_null=True)
    idempotencyKey = serializers.CharField()
    attempt = serializers.IntegerField()
    maxAttempts = serializers.IntegerField()
    outcome = serializers.CharField(allow_null=True)
    reason = serializers.CharField(allow_null=True)
    reasonAttempt = serializers.IntegerField(
        allow_null=True, help_text="the attempt the reason belongs to: while a newer attempt is queued or running, "
        "an earlier one's; null without a reason",
    )
    summary = serializers.CharField(allow_null=True)
    actor = serializers.CharField()
    approvedBy = serializers.CharField(allow_null=True)
    queuedAt = serializers.CharField(allow_null=True)
    finishedAt = serializers.CharField(allow_null=True)
    stdoutPath = serializers.CharField(allow_null=True)


class ApprovedSerializer(serializers.Serializer):
    proposal = ProposalItemSerializer()
    run = RunItemSerializer()


class PreviewAskedSerializer(serializers.Serializer):
    proposal = ProposalItemSerializer(help_text="its preview waiting (status pending)")


class RejectedSerializer(serializers.Serializer):
    proposal = ProposalItemSerializer()


class RunDecidedSerializer(serializers.Serializer):
    run = RunItemSerializer()


class LoopPausedSerializer(serializers.Serializer):
    """``POST /api/loops/{name}/pause``'s answer (docs/schedules.md, "Pausing a loop")."""

    loop = serializers.CharField()
    paused = serializers.JSONField(help_text="{by, at, note, until}: the pause, as GET /schedules shows it")
    otherDoors = serializers.CharField(help_text="what the pause does to events of the loop's type from other doors")


class LoopResumedSerializer(serializers.Serializer):
    """``POST /api/loops/{name}/resume``'s answer."""

    loop = serializers.CharField()
    paused = serializers.JSONField(help_text="null: the loop fires its current slot at the next iteration")
    coveredSlots = serializers.IntegerField(help_text="how many of the loop's slots the pause covered")


class LoopTriggeredSerializer(serializers.Serializer):
    """``POST /api/loops/{name}/trigger``'s answer (docs/schedules.md, "Running a loop once now")."""

    loop = serializers.CharField()
    eventId = serializers.CharField(help_text="manual:<loop>:<requestId>")
    duplicate = serializers.BooleanField(help_text="true: the request id was used before; nothing new was admitted")
    planning = serializers.JSONField(help_text="{outcome, reason}: PROPOSED, or how planning ended it")
    proposal = serializers.JSONField(help_text="the proposal to decide, as GET /api/proposals/{id} shows it, or null")


class PageSerializer(serializers.Serializer):
    """One page, newest first: ``{count, next, previous, results}`` (``?page=N&pageSize=M``)."""

    count = serializers.IntegerField(help_text="items in all pages")
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)


class EventPageSerializer(PageSerializer):
    results = EventItemSerializer(many=True)


class ProposalPageSerializer(PageSerializer):
    results = ProposalItemSerializer(many=True)


class RunPageSerializer(PageSerializer):
    results = RunItemSerializer(many=True)

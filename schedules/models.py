"""Schedule bookkeeping: derived data about loops; the events table stays the truth (DESIGN §5)."""

from django.db import models


class ScheduleState(models.Model):
    """Per loop: the last fired slot, the last tick, and since when the loop is enabled.

    Written in the transaction that admits the tick; if it were lost, the unique
    eventIds of the events table would still keep a slot from firing twice.
    """

    loop = models.CharField(max_length=63, unique=True)
    last_slot = models.DateTimeField(null=True, blank=True)
    last_event_id = models.CharField(max_length=200, blank=True, default="")
    last_tick_at = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    enabled_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["loop"]

    def __str__(self) -> str:
        return f"{self.loop}: last slot {self.last_slot}"


class SlotLoopStatus(models.Model):
    """One row per slot-loop process name: when it last completed an iteration (the doctor reads it)."""

    name = models.CharField(max_length=100, unique=True)
    last_iteration_at = models.DateTimeField()
    pid = models.IntegerField()
    host = models.CharField(max_length=200)

    class Meta:
        verbose_name_plural = "slot loop status"

    def __str__(self) -> str:
        return f"{self.name} at {self.last_iteration_at}"

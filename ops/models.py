"""The runtime's own processes, as the doctor sees them (docs/design.md §11; docs/operations.md)."""

from django.db import models


class ProcessRecord(models.Model):
    """One long-running process (a slot loop, a run worker): who and where it is, since when it
    runs and when it was last seen, on the database's clock, and how far its own clock is
    from the database's (``clock_offset_seconds`` = host clock − database clock, measured
    around one query, at its midpoint). Written by the process itself
    (``ops.process_rows``); the doctor lists the recently seen ones and their skew.
    """

    role = models.CharField(max_length=32)
    host = models.CharField(max_length=200)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    clock_offset_seconds = models.FloatField()

    class Meta:
        ordering = ["role", "host", "pid"]
        indexes = [models.Index(fields=["last_seen_at"], name="process_last_seen_idx")]

    def __str__(self) -> str:
        return f"{self.role} {self.host}:{self.pid}"

"""The SQLite engine of the runtime: Django's, with writers queued in the kernel (``base``)."""

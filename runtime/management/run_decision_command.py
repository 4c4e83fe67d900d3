"""What ``retry_run`` and ``close_run`` share with ``approve``/``reject``: ``--as``, the OS user, exit 2 when refused."""

from runtime.management.decision_command import DecisionCommand


class RunDecisionCommand(DecisionCommand):
    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int, help="the interrupted run's id (see `manage.py runs --status interrupted`)")
        parser.add_argument("--as", dest="username", required=True, help="the operator deciding (needs approve_proposal)")

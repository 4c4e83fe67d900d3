"""The import rule of docs/design.md §1: lib → runtime → schedules | intake → ops → factory_site.

A module may import from its own package and from the layers before it; ``schedules``
and ``intake`` are siblings that never import each other; ``lib`` imports neither
Django nor any package of the project. Every import counts, including those inside
functions and relative ones.
"""

import ast
from pathlib import Path

import pytest

PROJECT_DIR = Path(__file__).resolve().parents[2]
#: Each package's layer; a module may import a package of a lower layer (or its own).
LAYERS = {"lib": 0, "runtime": 1, "schedules": 2, "intake": 2, "ops": 3, "factory_site": 4}


def imported_modules(source: str, module: str) -> list[str]:
    """Every module ``source`` (the text of ``module``, dotted) imports, relative ones resolved."""
    package = module.split(".")[:-1]  # a package's own __init__ counts as a module inside it
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.append(".".join(base + ([node.module] if node.module else [])))
            else:
                found.append(node.module)
    return found


def violations(source: str, module: str) -> list[str]:
    """``"<module> imports <name>"`` for every import of ``source`` that breaks the rule."""
    own = module.split(".")[0]
    wrong = []
    for name in imported_modules(source, module):
        top = name.split(".")[0]
        if own == "lib" and top == "django":
            wrong.append(f"{module} imports {name}: lib is plain Python")
        elif top in LAYERS and top != own and LAYERS[top] >= LAYERS[own]:
            wrong.append(f"{module} imports {name}")
    return wrong


def project_modules():
    for package in LAYERS:
        for path in sorted((PROJECT_DIR / package).rglob("*.py")):
            relative = path.relative_to(PROJECT_DIR).with_suffix("")
            yield path, ".".join(relative.parts)


def test_no_import_crosses_the_layers_the_wrong_way():
    wrong = [v for path, module in project_modules() for v in violations(path.read_text(), module)]
    assert wrong == []


def test_every_package_of_the_project_has_a_layer():
    packages = {path.parent.name for path in PROJECT_DIR.glob("*/__init__.py")} - {"tests", "bench"}
    assert packages == set(LAYERS)


@pytest.mark.parametrize("module,source,expected", [
    ("runtime.services.planning", "from schedules.models import ScheduleState", ["runtime.services.planning imports schedules.models"]),
    ("schedules.ticks", "import intake.views", ["schedules.ticks imports intake.views"]),
    ("intake.views", "def f():\n    from ops.doctor import collect_status", ["intake.views imports ops.doctor"]),
    ("lib.slots", "from django.conf import settings", ["lib.slots imports django.conf: lib is plain Python"]),
    ("lib.slots", "from runtime.models import Event", ["lib.slots imports runtime.models"]),
    ("runtime.services.outbox", "from .admission import admit_event", []),
    ("runtime.services.outbox", "from ..models import Event", []),
    ("ops.slot_loop", "from schedules.ticks import emit_due_ticks\nfrom runtime.services import planning", []),
    ("schedules.keyed.firing", "from ..state import advance_loop", []),
])
def test_the_rule_names_each_wrong_import(module, source, expected):
    assert violations(source, module) == expected

"""Every test can fail (issue 30): a test function asserts, expects an exception, or calls a
helper that does; and no test hides its assertion behind a constant condition, as
``assert x == [a] if False else [b]`` did (it parses as ``assert ((x == [a]) if False else [b])``,
always true). Ruff has no rule for constant conditions (pylint's ``using-constant-test``), so
this walks the tests' syntax trees, as ``test_layers.py`` walks the imports."""

import ast
from pathlib import Path

from tests.conftest import PROJECT_DIR

TESTS_DIR = PROJECT_DIR / "tests"

#: Tests that check through a fixture rather than an ``assert``: ``django_assert_num_queries``
#: fails the test when the block's query count differs.
CHECK_THROUGH_A_FIXTURE = {
    "tests/db/test_clock.py::test_recent_database_now_reads_again_after_forget_reading_or_a_monotonic_clock_gone_back",
}

#: Attributes whose call checks something: ``pytest.raises``/``warns``/``fail``.
CHECKING_CALLS = {"raises", "warns", "fail"}


def parsed() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(TESTS_DIR.rglob("*.py"))]


def checks_directly(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Assert) or (isinstance(n, ast.Attribute) and n.attr in CHECKING_CALLS)
        for n in ast.walk(node)
    )


def called_names(node: ast.AST) -> set[str]:
    names = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            names.add(n.func.id if isinstance(n.func, ast.Name) else getattr(n.func, "attr", ""))
    return names


def functions(modules) -> dict[str, list[ast.FunctionDef]]:
    found: dict[str, list] = {}
    for _, module in modules:
        for node in ast.walk(module):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.setdefault(node.name, []).append(node)
    return found


def test_every_test_function_asserts_or_calls_a_helper_that_does():
    modules = parsed()
    by_name = functions(modules)
    # A helper checks when its body asserts, or it calls a helper that checks (by name, across
    # tests/: a helper shadowed by a name that does not check is counted as checking).
    checking = {name for name, nodes in by_name.items() if any(checks_directly(n) for n in nodes)}
    grown = True
    while grown:
        grown = False
        for name, nodes in by_name.items():
            if name not in checking and any(called_names(n) & checking for n in nodes):
                checking.add(name)
                grown = True
    silent = sorted(
        f"{path.relative_to(PROJECT_DIR)}::{node.name}"
        for path, module in modules if path.name.startswith("test_")
        for node in ast.walk(module)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")
        and not checks_directly(node) and not called_names(node) & checking
    )
    assert silent == sorted(CHECK_THROUGH_A_FIXTURE)


def test_no_test_condition_is_a_constant():
    # ``while True`` is a loop, not a check: only ``if``, conditional expressions and ``assert``.
    constant = sorted(
        f"{path.relative_to(PROJECT_DIR)}:{node.lineno}"
        for path, module in parsed()
        for node in ast.walk(module)
        if isinstance(node, ast.IfExp | ast.If | ast.Assert) and isinstance(node.test, ast.Constant)
    )
    assert constant == []

"""The configuration YAML loader (lib/strict_yaml.py): libyaml's parser, YAML 1.1's traps removed."""

import datetime

import pytest
import yaml

from lib.strict_yaml import StrictLoader, load_yaml


def test_it_parses_with_libyaml():
    assert issubclass(StrictLoader, yaml.CSafeLoader)


def test_a_key_twice_in_one_mapping_is_an_error():
    with pytest.raises(yaml.constructor.ConstructorError) as raised:
        load_yaml("schedules:\n  reaper:\n    enabled: true\nschedules:\n  heartbeat: {}\n")
    assert raised.value.problem == "found the key 'schedules' twice"
    assert (raised.value.problem_mark.line, raised.value.problem_mark.column) == (3, 0)
    # The mapping that holds the key twice is named too: the message reads "in …, line 1".
    assert (raised.value.context, raised.value.context_mark.line, raised.value.context_mark.column) == (
        "while constructing a mapping", 0, 0,
    )


def test_a_key_twice_deeper_down_is_an_error_too():
    with pytest.raises(yaml.constructor.ConstructorError, match="found the key 'every' twice"):
        load_yaml("schedules:\n  reaper:\n    every: 5m\n    every: 10m\n")


@pytest.mark.parametrize(("text", "value"), [
    ("12:00", "12:00"), ("1:30:00", "1:30:00"), ("190:20:30.15", "190:20:30.15"),
    ("42", 42), ("-7", -7), ("0x1f", 31), ("0o17", "0o17"), ("017", 15), ("1_000", 1000),
    ("1.5", 1.5), ("1e3", "1e3"), ("1.0e+3", 1000.0), (".inf", float("inf")),
    ("true", True), ("no", False), ("~", None), ("2026-11-30", datetime.date(2026, 11, 30)),
])
def test_scalars_are_what_they_look_like(text, value):
    assert load_yaml(f"x: {text}\n") == {"x": value}


def test_a_syntax_error_is_a_yaml_error():
    with pytest.raises(yaml.YAMLError):
        load_yaml("schedules:\n  reaper: [unclosed\n")


def test_each_distinct_scalar_text_is_resolved_once_per_document(monkeypatch):
    # The cache of StrictLoader.resolve: a repeated plain "5m" is resolved once; the quoted "5m"
    # (another kind of scalar, always a string) and the mapping and sequence have their own.
    resolved = []
    resolve = yaml.resolver.BaseResolver.resolve

    def spy(self, kind, value, implicit):
        resolved.append((kind.__name__, value))
        return resolve(self, kind, value, implicit)

    monkeypatch.setattr(yaml.resolver.BaseResolver, "resolve", spy)
    assert load_yaml('a: 5m\nb: 5m\nc: [5m, "5m", 12, "12"]\n') == {"a": "5m", "b": "5m", "c": ["5m", "5m", 12, "12"]}
    assert resolved == [("MappingNode", None), ("ScalarNode", "a"), ("ScalarNode", "5m"), ("ScalarNode", "b"),
                        ("ScalarNode", "c"), ("SequenceNode", None), ("ScalarNode", "5m"), ("ScalarNode", "12"),
                        ("ScalarNode", "12")]


def test_an_alias_is_refused_before_it_is_expanded():
    laughs = "l0: &L0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"l{n}: &L{n} [{', '.join([f'*L{n - 1}'] * 10)}]\n" for n in range(1, 8)
    )
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(laughs)
    assert str(raised.value) == (
        "found an alias (*name) of the value anchored here: configuration files take no anchors and aliases;"
        ' write the value out\n  in "<unicode string>", line 1, column 5'
    )
    with pytest.raises(yaml.YAMLError, match="found an alias"):
        load_yaml("a: &x 1\nb: *x\n")


def test_a_star_or_an_anchor_without_an_alias_loads_as_written():
    assert load_yaml("note: 'a * b'\nlist: &L [1, 2]\n") == {"note": "a * b", "list": [1, 2]}
    assert load_yaml("") is None
    assert load_yaml("# only a comment\n") is None

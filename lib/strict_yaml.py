"""Configuration YAML without YAML 1.1's traps (docs/decisions.md: configuration files).

The loader parses with libyaml (``yaml.CSafeLoader``: about ten times faster than the
pure-Python parser, which an overlay of 100,000 loops needs) and constructs in Python,
where the rules below live. PyYAML's wheels ship libyaml; where it is missing, the
pure-Python ``SafeLoader`` parses the same documents the same way, only slower.
"""

import re

import yaml

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_SafeLoader):
    """A safe loader without YAML 1.1's traps for configuration files.

    A key twice in one mapping is an error (PyYAML silently keeps the last one, so a
    second ``schedules:`` appended to an overlay would drop the first); and ``12:00`` is
    the string it looks like, not the base-60 integer 720 of YAML 1.1.

    A plain scalar's tag depends on its text alone (no path resolvers are registered), so
    each distinct text is resolved once per document: an overlay of 100,000 loops repeats
    a handful of values, and resolving was most of the time its parse took.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self._scalar_tags: dict[tuple, str] = {}

    def resolve(self, kind, value, implicit):
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._scalar_tags.get(key)
        if tag is None:
            tag = self._scalar_tags[key] = super().resolve(kind, value, implicit)
        return tag

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, f"found the key {key!r} twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."),
)


def load_yaml(text: str):
    """Parse configuration YAML with ``StrictLoader``; raises yaml.YAMLError, also for an alias
    (``*name``): nested aliases of lists multiply a few hundred bytes into gigabytes once
    expanded (a "billion laughs"), and a configuration file has no need of them."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:  # no alias without a star: the common file is not walked
            _refuse_aliases(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_aliases(root: yaml.Node) -> None:
    """Raise ``yaml.constructor.ConstructorError`` at the first node met twice in the document
    ``root`` — an alias: libyaml hands each alias the anchored node itself."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise yaml.constructor.ConstructorError(
                None, None, "found an alias (*name) of the value anchored here: configuration files take no anchors and aliases;"
                " write the value out",
                node.start_mark,
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)

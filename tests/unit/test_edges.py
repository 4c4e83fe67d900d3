"""The tracked edges: a run that needs a human never chains (docs/design.md §8)."""


def test_the_tracked_edges_never_chain_failed_or_blocked(registry_files):
    edges = registry_files.read("edges.json")
    assert edges and not [e for e in edges if e["outcome"] in ("FAILED", "BLOCKED")]

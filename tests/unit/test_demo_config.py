"""The demo's configuration loads over the kernel registry and scripts only registered definitions (docs/design.md §8)."""

from pathlib import Path

from runtime.adapters.fake import load_script
from runtime.registry import load_registry


def test_the_demo_config_loads_and_scripts_only_registered_definitions(settings):
    demo_config = Path(settings.BASE_DIR) / "demo" / "config"
    registry = load_registry(Path(settings.BASE_DIR) / "registry", demo_config)
    assert {loop.name for loop in registry.loops.values() if loop.enabled} == {"heartbeat", "merge-alpha", "merge-beta"}
    settings.FACTORY_CONFIG_DIR = demo_config
    scripted = set(load_script(registry.definitions))
    assert scripted == {
        "ci-log-capture@1", "dispatch@1", "merge-apply@1", "merge-scan@1", "ship-scan@1", "triage@1", "work-scan@1",
    }
    assert scripted <= set(registry.definitions)

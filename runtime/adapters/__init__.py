"""Adapters: how a run's plan is executed (DESIGN §8)."""

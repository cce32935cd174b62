"""Deterministic gates (Tutorial 3): catching problems before they reach a model."""

from .base import DeterministicGate, GateContext, GateResult, GateRunner, Severity

__all__ = ["DeterministicGate", "GateContext", "GateResult", "GateRunner", "Severity"]

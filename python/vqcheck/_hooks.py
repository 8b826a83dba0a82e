"""Hooks that let one part of vqcheck call another without importing it.

vqcheck.torch.step() ends a training step under `vqcheck watch` in a
program without an optimizer; the bridge (vqcheck._bridge), which imports
vqcheck.torch, registers its step end here when it is installed, so that
vqcheck.torch never imports the bridge (no circle). Outside `vqcheck
watch` nothing is registered and step() does nothing.

Imports nothing; importing it starts nothing.
"""
from __future__ import annotations

from typing import Callable, List

_step_end: List[Callable[[], None]] = []


def on_step_end(hook: Callable[[], None]) -> None:
    """hook() at every step end from vqcheck.torch.step() (once, however
    often it is registered)."""
    if hook not in _step_end:
        _step_end.append(hook)


def remove_step_end(hook: Callable[[], None]) -> None:
    """Takes a hook registered by on_step_end off again (a no-op for one
    that is not registered)."""
    if hook in _step_end:
        _step_end.remove(hook)


def step_end() -> None:
    """Runs the step-end hooks, in the order they were registered."""
    for hook in list(_step_end):
        hook()

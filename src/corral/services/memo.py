"""Remembering a view computed from large, unchanging inputs.

The configuration (:meth:`ConfigService.state`), a cluster's nodes and its bound pods
(``backends/embedded/bound_pods.py``) are the same objects for as long as they do not change,
so a view computed from them — which nodes serve which pool, every pool's quota figures, the
topology picture — is kept and handed out again until one of them is replaced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SameInputs(Generic[T]):
    """Values by ``key``, each kept while its ``inputs`` are the very same objects."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._kept: dict[Hashable, tuple[tuple[Any, ...], T]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, inputs: Sequence[Any], compute: Callable[[], T]) -> T:
        with self._lock:
            found = self._kept.get(key)
        if found is not None and _same(found[0], inputs):
            return found[1]
        value = compute()
        with self._lock:
            if len(self._kept) >= self._size:
                self._kept.clear()
            self._kept[key] = (tuple(inputs), value)
        return value


def _same(kept: Sequence[Any], inputs: Sequence[Any]) -> bool:
    return len(kept) == len(inputs) and all(a is b for a, b in zip(kept, inputs, strict=True))

"""Accepted workflows in the database: rows <-> the domain's records
(``domain/workflows/record.py``) and nothing else.

``store.py`` is the store the services use; ``reads.py`` reads whole workflows back,
``listings.py`` the lists pages show, ``writes.py`` writes submissions and a tick's changes,
``inbox.py`` is the controller's inbox, and ``records.py`` maps rows to records.
"""

from corral.store.workflows.store import WorkflowStore
from corral.store.workflows.writes import KeyTaken

__all__ = ["KeyTaken", "WorkflowStore"]

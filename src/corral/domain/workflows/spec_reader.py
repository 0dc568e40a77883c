"""Reading a workflow document: the rules of OSMO's spec version 2 (names, keys, units) and
the reader that checks shapes and turns every problem into a ``FILE:LINE:COL: field: reason``
UserError (docs/osmo-reference.md#the-workflow-file).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from corral.domain.formats.documents import locate
from corral.domain.formats.unknown_fields import unknown_field
from corral.domain.labels import CONTROL_CONTAINER
from corral.domain.workflows.spec import GroupSpec, TaskFileContents
from corral.errors import UserError

# ----------------------------------------------------------------------------------- rules

SUPPORTED_VERSION = 2
NAME_PATTERN = re.compile(r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$")
MAX_WORKFLOW_NAME_LENGTH = 64
MAX_LABELS = 16
RESERVED_TASK_NAME = CONTROL_CONTAINER
EXIT_ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")
EXIT_CODES = re.compile(r"^(\d+(-\d+)?)(,\d+(-\d+)?)*$")
#: OSMO's size units (all binary: ``G`` is read as ``Gi``); a bare number is bytes.
SIZE_UNITS = ("Ti", "TiB", "T", "Gi", "GiB", "G", "Mi", "MiB", "M", "Ki", "KiB", "K", "B", "m")
SIZE = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>[a-zA-Z]*)$")
CACHE_PERCENT = re.compile(r"^(\d+)%$")
TOP_LEVEL_KEYS = ("workflow", "version", "default-values")

WORKFLOW_KEYS = ("name", "pool", "labels", "tasks", "groups", "resources", "timeout", "backend")
GROUP_KEYS = ("name", "tasks", "barrier", "ignoreNonleadStatus")
TASK_KEYS = (
    "name", "image", "command", "args", "lead", "environment", "credentials", "inputs",
    "outputs", "files", "volumeMounts", "privileged", "hostNetwork", "resource", "exitActions",
    "checkpoint", "downloadType", "cacheSize", "kpis", "stopNotice", "noticeSignal",
)  # fmt: skip
RESOURCE_KEYS = ("cpu", "gpu", "memory", "storage", "platform", "nodesExcluded", "topology")
TOPOLOGY_KEYS = ("key", "group", "requirementType")
TIMEOUT_KEYS = ("exec_timeout", "queue_timeout")
INPUT_KEYS = ("task", "url", "regex")
OUTPUT_KEYS = ("url", "regex")
FILE_KEYS = ("path", "contents", "base64", "localpath")
CHECKPOINT_KEYS = ("path", "url", "frequency", "regex")
KPI_KEYS = ("index", "path")

Path = tuple[str | int, ...]
#: A parsed group and the path of its task list (for messages).
Located = tuple[GroupSpec, Path]


def k8s_name(name: str) -> str:
    """OSMO's name normalisation (``kb_objects.k8s_name``): lower case, ``_`` -> ``-``."""
    return name.lower().replace("_", "-")


def format_field(path: Sequence[str | int]) -> str:
    """``("workflow", "tasks", 0, "command")`` -> ``workflow.tasks[0].command``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


# ---------------------------------------------------------------------------------- reader


class Reader:
    """Turns problems at a path of the document into located user errors."""

    def __init__(
        self,
        text: str,
        source: str,
        rendered: bool,
        local_files: Mapping[str, TaskFileContents] | None = None,
    ) -> None:
        self.text = text
        self.source = source
        self.rendered = rendered
        #: What the CLI read for each ``files[].localpath`` (docs/workflows.md#files).
        self.local_files = local_files or {}

    def fail(self, path: Path, reason: str) -> NoReturn:
        where = self.position(path)
        note = " (in the rendered workflow)" if self.rendered else ""
        field_text = format_field(path)
        middle = f"{field_text}{note}: " if field_text else (f"{note.strip()}: " if note else "")
        raise UserError(f"{self.source}:{where}: {middle}{reason}")

    def position(self, path: Path) -> str:
        """``line:col`` of ``path`` or of its nearest ancestor in the text (``1:1`` if none)."""
        for end in range(len(path), 0, -1):
            try:
                found = locate(self.text, path[:end])
            except Exception:  # an unreadable text has no positions; the start will do
                found = None
            if found is not None:
                return str(found)
        return "1:1"

    # -- shapes ------------------------------------------------------------------------

    def mapping(self, value: Any, path: Path, allowed: Sequence[str] | None) -> dict[Any, Any]:
        """``value`` as a mapping (null is empty); with ``allowed``, unknown keys are refused."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping (key: value lines), not {kind_of(value)}.")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    self.fail((*path, str(key)), unknown_field(key, allowed))
        return value

    def sequence(self, value: Any, path: Path) -> list[Any]:
        """``value`` as a list (null is empty)."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, f"must be a list (lines starting with '- '), not {kind_of(value)}.")
        return value

    def string(self, value: Any, path: Path, *, coerce: bool = False) -> str:
        """Text; with ``coerce``, numbers and booleans become text as OSMO prints them."""
        if isinstance(value, str):
            return value
        if coerce and isinstance(value, bool | int | float):
            return str(value)
        what = "text or a number" if coerce else "text"
        self.fail(path, f"must be {what}, not {kind_of(value)}; quote the value if needed.")

    def required(self, mapping: Mapping[Any, Any], key: str, path: Path) -> Any:
        if key not in mapping or mapping[key] is None:
            self.fail(path, f'"{key}" is required; add it.')
        return mapping[key]

    def boolean(self, value: Any, path: Path, default: bool) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(path, f"must be true or false, not {kind_of(value)}.")
        return value

    def string_list(self, value: Any, path: Path, *, coerce: bool = False) -> tuple[str, ...]:
        items = self.sequence(value, path)
        return tuple(self.string(item, (*path, i), coerce=coerce) for i, item in enumerate(items))

    def regex(self, value: Any, path: Path) -> str | None:
        if value is None:
            return None
        text = self.string(value, path)
        try:
            re.compile(text)
        except (re.error, OverflowError, RecursionError, ValueError) as err:
            self.fail(path, f"regex {text!r} does not compile: {err}; fix the expression.")
        return text

    def name(self, value: Any, path: Path, kind: str) -> str:
        name = self.string(value, path)
        if not NAME_PATTERN.match(name):
            self.fail(
                path,
                f'{kind} name "{name}" is not valid: it must start with a letter, end with a '
                'letter or digit, and contain only letters, digits, "-" and "_".',
            )
        return name


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"text ({value!r})"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__} ({value})"


def located_error(
    text: str, path: tuple[str | int, ...], reason: str, *, source: str, rendered: bool
) -> UserError:
    """A UserError naming ``source:line:column`` of ``path`` in the workflow ``text``."""
    try:
        Reader(text, source, rendered).fail(path, reason)
    except UserError as err:
        return err
    raise AssertionError("fail always raises")  # pragma: no cover

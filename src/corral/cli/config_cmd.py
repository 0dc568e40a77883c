"""``corral config ...``: OSMO's ``osmo config`` verbs over corral's REST API.

Verbs and arguments follow OSMO's CLI (``config update POOL --file pool.json``,
``config set ROLE osmo-team pool``) so that its docs and scripts work unchanged; ``apply`` is new.
Where OSMO's CLI has a known defect the fix is described in ``docs/cli.md``.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import quote

import typer

from corral import files
from corral.cli.client import ApiError, Client
from corral.cli.output import (
    FormatOption,
    OutputFormat,
    compact,
    dotted,
    echo,
    fail,
    handle_errors,
    local_time,
    print_json,
    print_table,
    print_warnings,
)
from corral.domain.access.generated_roles import generated_role
from corral.domain.configs.bundles import Origin
from corral.domain.configs.types import ConfigType
from corral.domain.formats.documents import Position, locate, parse_document
from corral.errors import UserError

app = typer.Typer(
    rich_markup_mode=None,
    help="Show, change and version the configuration (OSMO's `osmo config`).",
    no_args_is_help=True,
)

KeyPath = tuple[str | int, ...]

# ----------------------------------------------------------------------------- arguments

DescriptionOption = Annotated[
    str | None,
    typer.Option("--description", help="Why: stored with the new revision (default: generated)."),
]
TagsOption = Annotated[
    list[str] | None,
    typer.Option("--tags", "--tag", help="Tag for the new revision (repeat, or a,b)."),
]
FileOption = Annotated[
    str | None,
    typer.Option("--file", "-f", help="JSON or YAML file (`-` reads stdin)."),
]


def split_tags(values: Sequence[str] | None) -> list[str]:
    """``--tags a --tags b,c`` → ``[a, b, c]`` (OSMO's ``--tags a b`` cannot be said in Click)."""
    return [tag.strip() for value in values or () for tag in value.split(",") if tag.strip()]


@dataclass(frozen=True)
class TypeRef:
    """``TYPE`` or ``TYPE:REV`` from the command line (revision None = the current config)."""

    ctype: ConfigType
    revision: int | None

    @property
    def label(self) -> str:
        at = "current" if self.revision is None else f"r{self.revision}"
        return f"{self.ctype.value}:{at}"


def parse_ref(text: str) -> TypeRef:
    type_text, has_revision, revision = text.partition(":")
    ctype = ConfigType.parse(type_text)
    if not has_revision:
        return TypeRef(ctype, None)
    if not revision.isdigit() or int(revision) < 1:
        raise UserError(
            f"Invalid revision {revision!r} in {text!r}: use TYPE:N with N a revision number, "
            f"e.g. {ctype.value}:3"
        )
    return TypeRef(ctype, int(revision))


def segment(ctype: ConfigType, name: str | None = None) -> str:
    """The API path of a type (and item): ``/api/configs/pod_template/l40s``."""
    path = f"/api/configs/{ctype.url_segment}"
    return f"{path}/{quote(name, safe='')}" if name is not None else path


def write_body(
    document: Any, description: str | None, tags: list[str], base_revision: int | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"configs": document}
    if description is not None:
        body["description"] = description
    if tags:
        body["tags"] = tags
    if base_revision is not None:
        body["base_revision"] = base_revision
    return body


# ---------------------------------------------------------------------- files and errors


@dataclass(frozen=True)
class SourceFile:
    """A document the user gave us, with its text so that errors can point at a line."""

    name: str
    text: str
    document: Any


def read_source(path: str) -> SourceFile:
    if path == "-":
        text = sys.stdin.read()
        return SourceFile("<stdin>", text, parse_document(text, "<stdin>"))
    text, document = files.read_document(Path(path))
    return SourceFile(path, text, document)


def locate_nearest(text: str, path: Sequence[str | int]) -> Position | None:
    """The position of ``path`` in ``text``, or of its nearest ancestor that is there.

    A missing key (``Required key 'backend' is missing``) is not in the file, but the object
    that lacks it is.
    """
    for end in range(len(path), 0, -1):
        found = locate(text, path[:end])
        if found is not None:
            return found
    return None


def fail_at(message: str, filename: str, text: str, path: Sequence[str | int]) -> NoReturn:
    """``FILE:LINE:COL: message`` for the key at ``path`` (``FILE: message`` if not found)."""
    where = locate_nearest(text, path)
    fail(f"{filename}:{where}: {message}" if where else f"{filename}: {message}", located=True)


def fail_in_file(err: ApiError, filename: str, text: str, prefix: KeyPath) -> NoReturn:
    """Report a server error inside the file when it names a field (the item is at ``prefix``)."""
    if not err.path:
        fail(err.message)
    fail_at(err.message, filename, text, [*prefix, *err.path])


def unwrap_item(ctype: ConfigType, name: str, source: SourceFile) -> tuple[Any, KeyPath]:
    """The item ``name`` in a file, and where it sits in the file.

    OSMO's docs write one item as ``{"l40s": {...}}`` for ``config update POD_TEMPLATE l40s``,
    and whole documents as ``{"pools": {"x": {...}}}``; a file holding just the item works too.
    """
    document: Any = source.document
    prefix: KeyPath = ()
    wrapper = ctype.spec.bundle_key
    wrapped = (
        wrapper is not None
        and isinstance(document, dict)
        and set(document) == {wrapper}
        and isinstance(document[wrapper], dict | list)
    )
    if wrapped:
        assert wrapper is not None
        document, prefix = document[wrapper], (wrapper,)
    if (
        isinstance(document, dict)
        and (wrapped or set(document) == {name})
        and name in document
        and isinstance(document[name], dict | list)
    ):
        return document[name], (*prefix, name)
    if isinstance(document, list):
        for index, entry in enumerate(document):
            if isinstance(entry, dict) and entry.get("name") == name:
                return entry, (*prefix, index)
    if wrapped:
        names = (
            [str(e.get("name")) for e in document if isinstance(e, dict)]
            if isinstance(document, list)
            else list(document)
        )
        fail(
            f"{source.name}: no {ctype.spec.label.lower()} '{name}' under '{wrapper}'. "
            f"Items: {', '.join(names) or '(none)'}"
        )
    return document, prefix


# ------------------------------------------------------------------------------- helpers


def current_revision(client: Client, ctype: ConfigType) -> int:
    """The revision of the current config of ``ctype`` (0 if it was never written)."""
    heads = client.get("/api/configs")["configs"]
    return next((int(h["revision"]) for h in heads if h["config_type"] == ctype.value), 0)


def written_revision(result: dict[str, Any], ctype: ConfigType) -> int | None:
    return next(
        (
            int(r["revision"])
            for r in result.get("revisions", [])
            if r["config_type"] == ctype.value
        ),
        None,
    )


def summary(client: Client, ctype: ConfigType, result: dict[str, Any]) -> str:
    """``POOL updated to revision 5`` or ``POOL unchanged (revision 4)``."""
    revision = written_revision(result, ctype)
    if revision is not None:
        return f"{ctype.value} updated to revision {revision}"
    return f"{ctype.value} unchanged (revision {current_revision(client, ctype)})"


def fetch_data(client: Client, ref: TypeRef) -> Any:
    """The config of ``ref`` in OSMO's wire shape: current, or the data of a revision."""
    if ref.revision is None:
        return client.get(segment(ref.ctype))
    found = client.get("/api/configs/history", config_types=ref.ctype.value, revision=ref.revision)[
        "configs"
    ]
    if not found:
        fail(f"No config history entry found for type {ref.ctype.value} at revision {ref.revision}")
    return found[0]["data"]


def _named_map(node: list[Any]) -> dict[str, Any] | None:
    """A list of named objects (roles, backends) as a map by name; None if it is not one."""
    if node and all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in node):
        return {e["name"]: e for e in node}
    return None


def select(ctype: ConfigType, data: Any, names: Sequence[str]) -> Any:
    """Walk ``names`` into ``data``: OSMO's ``config show POOL my-pool platforms``."""
    if not names:
        return data
    node = data
    wrapper = {ConfigType.POOL: "pools", ConfigType.BACKEND: "backends"}.get(ctype)
    if wrapper and isinstance(node, dict) and set(node) == {wrapper}:
        node = node[wrapper]
    walked: list[str] = []
    for name in names:
        node = _child(node, name, " ".join([ctype.value, ".".join(walked)]).strip())
        walked.append(name)
    return node


def _child(node: Any, name: str, where: str) -> Any:
    if isinstance(node, list):
        named = _named_map(node)
        if named is not None:
            node = named
        elif name.lstrip("-").isdigit() and -len(node) <= int(name) < len(node):
            return node[int(name)]
        else:
            fail(
                f"{where} has no item '{name}'. Items: "
                f"{', '.join(map(str, range(len(node)))) or '(none)'}"
            )
    if isinstance(node, dict):
        if name in node:
            return node[name]
        fail(f"{where} has no item '{name}'. Items: {', '.join(map(str, node)) or '(none)'}")
    fail(f"{where} is {compact(node)}; it has no item '{name}'")


# ---------------------------------------------------------------------------------- list


@app.command("list")
@handle_errors
def list_configs(output: FormatOption = OutputFormat.text) -> None:
    """The current revision of every config type."""
    found = Client().get("/api/configs")
    if output is OutputFormat.json:
        print_json(found)
        return
    print_table(
        ["Config Type", "Revision", "Username", "Created At", "Description"],
        [
            [
                c["config_type"],
                str(c["revision"]),
                c["username"],
                local_time(c["created_at"]),
                c["description"],
            ]
            for c in found["configs"]
        ],
    )


# ---------------------------------------------------------------------------------- show


@handle_errors
def show(
    target: Annotated[str, typer.Argument(metavar="TYPE[:REV]", help="e.g. POOL or POOL:3.")],
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="NAME", help="Keys or list indexes to show, e.g. my-pool platforms."
        ),
    ] = None,
    output: FormatOption = OutputFormat.json,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="POOL only: add the derived fields (parsed_pod_template, labels, ...).",
        ),
    ] = False,
) -> None:
    """Print a config (current or of revision REV) as JSON."""
    del output  # always JSON; the option is accepted like on every other verb
    ref = parse_ref(target)
    client = Client()
    data = fetch_verbose(client, ref) if verbose else fetch_data(client, ref)
    print_json(select(ref.ctype, data, names or []))


def fetch_verbose(client: Client, ref: TypeRef) -> Any:
    """OSMO's verbose pool view: the current pools with every derived ``parsed_*`` field."""
    if ref.ctype is not ConfigType.POOL:
        fail(f"--verbose is only for POOL, not {ref.ctype.value}")
    if ref.revision is not None:
        fail("--verbose shows the current pools; it cannot be combined with POOL:REV")
    return client.get(segment(ref.ctype), verbose="true")


app.command("show")(show)
app.command("get", help="Alias of `show` (OSMO's docs call it `config get`).")(show)


# -------------------------------------------------------------------------------- update


@app.command()
@handle_errors
def update(
    config_type: Annotated[str, typer.Argument(metavar="TYPE", help="e.g. POOL, POD_TEMPLATE.")],
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="Replace only this item (a full PUT of it); without: every item in the file.",
        ),
    ] = None,
    file: FileOption = None,
    description: DescriptionOption = None,
    tags: TagsOption = None,
    base_revision: Annotated[
        int | None,
        typer.Option(
            min=0, help="Refuse the write (409) if the type is no longer at this revision."
        ),
    ] = None,
) -> None:
    """Write a config from a file (or, on a terminal, edit the current one in $EDITOR)."""
    ctype = ConfigType.parse(config_type)
    if name is not None and ctype.spec.singleton:
        fail(f"{ctype.value} is a single object: update it without a name")
    client = Client()
    edited = file is None
    source = read_source(file) if file is not None else edit_current(client, ctype, name)
    if source is None:
        echo(f"{ctype.value} unchanged: the edit changed nothing, so nothing was sent")
        return
    item, prefix = unwrap_item(ctype, name, source) if name is not None else (source.document, ())
    body = write_body(item, description, split_tags(tags), base_revision)
    try:
        result = client.request("PUT", segment(ctype, name), json=body)
    except ApiError as err:
        if edited:
            again = " ".join(
                [
                    "corral config update",
                    ctype.value,
                    *([name] if name else []),
                    "--file",
                    source.name,
                ]
            )
            typer.echo(f"Your edit is kept in {source.name}; fix it and run `{again}`.", err=True)
        fail_in_file(err, source.name, source.text, prefix)
    if edited:
        Path(source.name).unlink(missing_ok=True)
    echo(summary(client, ctype, result))
    print_warnings(result)


def edit_current(client: Client, ctype: ConfigType, name: str | None) -> SourceFile | None:
    """Open the current config in the user's editor; None when the edit changed nothing.

    Only on a terminal: a script without ``--file`` fails at once instead of waiting for input.
    """
    if not sys.stdin.isatty():
        fail("--file is required when not on a terminal")
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL")
    if not editor:
        fail("--file is required (or set $EDITOR to edit the current config)")
    try:
        current = client.get(segment(ctype, name))
    except ApiError as err:
        if err.status != 404 or name is None:
            raise
        current = {}  # a new item: start from an empty object
    handle, path = tempfile.mkstemp(prefix=f"corral-{ctype.url_segment}-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(json.dumps(current, indent=2, ensure_ascii=False) + "\n")
    try:
        status = subprocess.run([*shlex.split(editor), path], check=False).returncode
    except OSError as err:
        fail(f"cannot run the editor {editor!r}: {err}")
    if status != 0:
        fail(f"the editor exited with status {status}; nothing was sent (your text is in {path})")
    text, document = files.read_document(Path(path))
    if document == current:
        Path(path).unlink(missing_ok=True)
        return None
    return SourceFile(path, text, document)


# ----------------------------------------------------------------------------------- set


@app.command("set")
@handle_errors
def set_role(
    config_type: Annotated[str, typer.Argument(metavar="ROLE", help="Only ROLE can be set.")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="Role name, e.g. osmo-team.")],
    role_type: Annotated[
        str | None, typer.Argument(metavar="pool|backend", help="Generate a pool or backend role.")
    ] = None,
    field: Annotated[
        str | None, typer.Option("--field", help="The backend of a backend role.")
    ] = None,
    file: FileOption = None,
    description: Annotated[
        str | None,
        typer.Option("--description", help="The role's description (default: generated)."),
    ] = None,
    tags: TagsOption = None,
) -> None:
    """Create or replace a role: generated for a pool or backend, or from a file."""
    ctype = ConfigType.parse(config_type)
    if ctype is not ConfigType.ROLE:
        fail(
            f"config set only sets roles (ROLE), not {ctype.value}; use "
            f"`corral config update {ctype.value} ...`"
        )
    source: SourceFile | None = None
    prefix: KeyPath = ()
    if file is not None:
        if role_type is not None:
            fail("give either a role type (pool or backend) or --file, not both")
        source = read_source(file)
        role, prefix = unwrap_item(ctype, name, source)
    elif role_type is None:
        fail("give a role type (pool or backend) or --file FILE")
    else:
        role = generated_role(name, role_type, field)
    if description is not None and isinstance(role, dict):
        role = {**role, "description": description}
    client = Client()
    try:
        result = client.request(
            "PUT", segment(ctype, name), json=write_body(role, None, split_tags(tags))
        )
    except ApiError as err:
        if source is None:
            raise
        fail_in_file(err, source.name, source.text, prefix)
    echo(summary(client, ctype, result))
    print_warnings(result)


# -------------------------------------------------------------------------------- delete


@app.command()
@handle_errors
def delete(
    target: Annotated[
        str,
        typer.Argument(metavar="TYPE[:REV]", help="TYPE with NAME, or TYPE:REV for a revision."),
    ],
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="The item to delete.")] = None,
    description: DescriptionOption = None,
    tags: TagsOption = None,
) -> None:
    """Delete an item (TYPE NAME) or a past revision from the history (TYPE:REV)."""
    ref = parse_ref(target)
    client = Client()
    if ref.revision is not None:
        if name is not None:
            fail("give either TYPE NAME (an item) or TYPE:REV (a revision), not both")
        answer = client.request(
            "DELETE", f"/api/configs/history/{ref.ctype.url_segment}/revision/{ref.revision}"
        )
        echo(str(answer["message"]))
        return
    if name is None:
        fail(
            f"name the item to delete: corral config delete {ref.ctype.value} NAME "
            f"(or {ref.ctype.value}:REV to delete a revision)"
        )
    body: dict[str, Any] = {}
    if description is not None:
        body["description"] = description
    if split_tags(tags):
        body["tags"] = split_tags(tags)
    result = client.request("DELETE", segment(ref.ctype, name), json=body or None)
    revision = written_revision(result, ref.ctype)
    echo(f"{ref.ctype.value} {name} deleted (revision {revision})")


# ------------------------------------------------------------------------------- history


def parse_when(text: str | None, option: str) -> str | None:
    """``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM:SS`` in local time, as ISO 8601 with its offset."""
    if text is None:
        return None
    for layout in ("%Y-%m-%d", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(text, layout).astimezone().isoformat()
        except ValueError:
            continue
    fail(f"{option}: invalid time {text!r}; use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS (local time)")


@app.command()
@handle_errors
def history(
    config_type: Annotated[str | None, typer.Argument(metavar="TYPE")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many newest entries.")] = 0,
    count: Annotated[int, typer.Option(min=1, max=1000, help="How many entries.")] = 20,
    order: Annotated[str, typer.Option(help="asc or desc (by time).")] = "asc",
    name: Annotated[str | None, typer.Option(help="Only writes of this item.")] = None,
    revision: Annotated[int | None, typer.Option(help="Only this revision.")] = None,
    tags: Annotated[
        list[str] | None,
        typer.Option("--tags", "--tag", help="Only revisions with all these tags."),
    ] = None,
    at_timestamp: Annotated[
        str | None, typer.Option(help="The revision of each type current at this time.")
    ] = None,
    created_before: Annotated[str | None, typer.Option()] = None,
    created_after: Annotated[str | None, typer.Option()] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """List config revisions (newest COUNT after OFFSET, sorted by ORDER)."""
    if order.lower() not in ("asc", "desc"):
        fail(f"--order must be asc or desc, not {order!r}")
    params: dict[str, Any] = {
        "config_types": [ConfigType.parse(config_type).value] if config_type else None,
        "offset": offset,
        "limit": count,
        "order": order.upper(),
        "name": name,
        "revision": revision,
        "tags": split_tags(tags) or None,
        "at_timestamp": parse_when(at_timestamp, "--at-timestamp"),
        "created_before": parse_when(created_before, "--created-before"),
        "created_after": parse_when(created_after, "--created-after"),
        "omit_data": "false" if output is OutputFormat.json else "true",
    }
    found = Client().get("/api/configs/history", **params)
    if output is OutputFormat.json:
        print_json(found)
        return
    print_table(
        ["Config Type", "Name", "Revision", "Username", "Created At", "Description", "Tags"],
        [
            [
                c["config_type"],
                c["name"],
                str(c["revision"]),
                c["username"],
                local_time(c["created_at"]),
                c["description"],
                ", ".join(c["tags"]),
            ]
            for c in found["configs"]
        ],
    )


# ---------------------------------------------------------------------------------- diff


@app.command()
@handle_errors
def diff(
    first: Annotated[str, typer.Argument(metavar="TYPE[:REV]", help="Without REV: current.")],
    second: Annotated[
        str | None,
        typer.Argument(metavar="TYPE[:REV]", help="Without it, or without REV: current."),
    ] = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Show what changed between two revisions of a type (a unified diff of the JSON)."""
    left = parse_ref(first)
    right = parse_ref(second) if second is not None else TypeRef(left.ctype, None)
    if right.ctype is not left.ctype:
        fail(
            f"both sides of a diff must be the same config type, not {left.ctype.value} and "
            f"{right.ctype.value}"
        )
    found = Client().get(
        "/api/configs/diff",
        config_type=left.ctype.value,
        first_revision=left.revision,
        second_revision=right.revision,
    )
    if output is OutputFormat.json:
        print_json(found)
        return
    text = unified_diff(found["first_data"], found["second_data"], left.label, right.label)
    echo(text.rstrip("\n") if text else "No differences.")


def unified_diff(before: Any, after: Any, before_label: str, after_label: str) -> str:
    def lines(data: Any) -> list[str]:
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").splitlines(
            keepends=True
        )

    return "".join(difflib.unified_diff(lines(before), lines(after), before_label, after_label))


# ------------------------------------------------------------------------------ rollback


@app.command()
@handle_errors
def rollback(
    target: Annotated[str, typer.Argument(metavar="TYPE:REV", help="e.g. POOL:3.")],
    description: DescriptionOption = None,
    tags: TagsOption = None,
) -> None:
    """Make the config of TYPE equal to revision REV again (as a new revision)."""
    ref = parse_ref(target)
    if ref.revision is None:
        fail(f"give the revision to roll back to: {ref.ctype.value}:REV, e.g. {ref.ctype.value}:3")
    body: dict[str, Any] = {"config_type": ref.ctype.value, "revision": ref.revision}
    if description is not None:
        body["description"] = description
    if split_tags(tags):
        body["tags"] = split_tags(tags)
    client = Client()
    result = client.request("POST", "/api/configs/history/rollback", json=body)
    revision = written_revision(result, ref.ctype)
    if revision is None:
        echo(
            f"{ref.ctype.value} unchanged: it already equals r{ref.revision} "
            f"(revision {current_revision(client, ref.ctype)})"
        )
    else:
        echo(f"{ref.ctype.value} rolled back to r{ref.revision}: now revision {revision}")


# ----------------------------------------------------------------------------------- tag


@app.command()
@handle_errors
def tag(
    target: Annotated[str, typer.Argument(metavar="TYPE[:REV]", help="Without REV: current.")],
    set_tags: Annotated[list[str] | None, typer.Option("--set", help="Tags to add.")] = None,
    delete_tags: Annotated[
        list[str] | None, typer.Option("--delete", help="Tags to remove.")
    ] = None,
) -> None:
    """Add or remove tags of a revision."""
    ref = parse_ref(target)
    adding, removing = split_tags(set_tags), split_tags(delete_tags)
    if not adding and not removing:
        fail("give tags to add (--set T) or to remove (--delete T)")
    client = Client()
    revision = ref.revision or current_revision(client, ref.ctype)
    if not revision:
        fail(f"{ref.ctype.value} has no revisions yet")
    answer = client.request(
        "POST",
        f"/api/configs/history/{ref.ctype.url_segment}/revision/{revision}/tags",
        json={"set_tags": adding, "delete_tags": removing},
    )
    echo(
        f"{answer['config_type']} r{answer['revision']} tags: "
        f"{', '.join(answer['tags']) or '(none)'}"
    )


# --------------------------------------------------------------------------------- apply


@app.command()
@handle_errors
def apply(
    file: Annotated[
        Path, typer.Option("--file", "-f", help="A bundle file, or a directory of config files.")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would change; write nothing.")
    ] = False,
    description: DescriptionOption = None,
    tags: TagsOption = None,
    output: FormatOption = OutputFormat.text,
) -> None:
    """Write several config types at once, atomically (a file or a directory of files)."""
    bundle, origins = files.read_bundle_directory(file)
    if not bundle:
        fail(f"{file}: no config found (a directory is read for .json, .yaml and .yml files)")
    body: dict[str, Any] = {"bundle": bundle, "dry_run": dry_run}
    if description is not None:
        body["description"] = description
    if split_tags(tags):
        body["tags"] = split_tags(tags)
    try:
        result = Client().request("POST", "/api/configs/apply", json=body)
    except ApiError as err:
        fail_in_bundle(err, origins)
    if output is OutputFormat.json:
        print_json(result)
        return
    # The server reports every item of each type written; show the ones the bundle holds.
    items = [i for i in result["items"] if bundle_key(i["config_type"], i["name"]) in origins]
    print_table(
        ["Type", "Name", "Action", "Changes"],
        [
            [
                i["config_type"],
                i["name"] or "-",
                i["action"],
                str(len(i["changes"])) if i["action"] == "updated" else "",
            ]
            for i in items
        ],
    )
    if dry_run:
        for item in items:
            if item["action"] == "updated":
                echo(f"{item['config_type']} {item['name']}".rstrip() + ":")
                for change in item["changes"]:
                    echo(f"  {describe_change(change)}")
        echo("Dry run: nothing was written.")
    elif result["revisions"]:
        written = ", ".join(f"{r['config_type']} r{r['revision']}" for r in result["revisions"])
        echo(f"Revisions written: {written}")
    else:
        echo("Nothing changed: every item is already as given.")
    print_warnings(result)


def bundle_key(config_type: str, name: str) -> tuple[str, str]:
    """The ``(section, name)`` key of an item in the origins of a bundle."""
    ctype = ConfigType.parse(config_type)
    return (ctype.spec.bundle_key or "workflow", name)


def describe_change(change: dict[str, Any]) -> str:
    """``platforms.a100.description: "old" → "new"`` (absent/removed values named)."""
    before = "(absent)" if change["kind"] == "added" else compact(change["before"])
    after = "(removed)" if change["kind"] == "removed" else compact(change["after"])
    return f"{dotted(change['path'])}: {before} → {after}"


def fail_in_bundle(err: ApiError, origins: dict[tuple[str, str], Origin]) -> NoReturn:
    """Point a bundle error (path ``[section, name, ...]``) at the file that defined the item."""
    path = err.path
    if not path:
        fail(err.message)
    section = str(path[0])
    key, rest = (
        ((section, ""), path[1:])
        if section == "workflow"
        else ((section, str(path[1]) if len(path) > 1 else ""), path[2:])
    )
    origin = origins.get(key)
    if origin is None:
        fail(err.message)
    fail_at(err.message, origin.filename, origin.text, [*origin.path, *rest])

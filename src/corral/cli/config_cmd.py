"""``corral config ...``: OSMO's ``osmo config`` verbs over corral's REST API.

Verbs and arguments follow OSMO's CLI (``config update POOL --file pool.json``,
``config set ROLE osmo-team pool``) so that its docs and scripts work unchanged; ``apply`` is new.
Where OSMO's CLI has a known defect the fix is described in ``docs/cli.md``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from corral import files
from corral.cli import config_history
from corral.cli.client import ApiError, Client
from corral.cli.config_args import (
    DescriptionOption,
    FileOption,
    TagsOption,
    TypeRef,
    parse_ref,
    segment,
    split_tags,
    summary,
    write_body,
    written_revision,
)
from corral.cli.config_files import (
    KeyPath,
    SourceFile,
    edit_current,
    fail_in_bundle,
    fail_in_file,
    read_source,
    unwrap_item,
)
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
from corral.domain.configs.config_type import ConfigType

app = typer.Typer(
    rich_markup_mode=None,
    help="Show, change and version the configuration (OSMO's `osmo config`).",
    no_args_is_help=True,
)

# ----------------------------------------------------------------------- reading a config


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
    if name is not None and ctype.singleton:
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


# ----------------------------------------------------------- history, diff, rollback, tag

app.command()(config_history.history)
app.command()(config_history.diff)
app.command()(config_history.rollback)
app.command()(config_history.tag)


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
    return (ctype.bundle_key or "workflow", name)


def describe_change(change: dict[str, Any]) -> str:
    """``platforms.a100.description: "old" → "new"`` (absent/removed values named)."""
    before = "(absent)" if change["kind"] == "added" else compact(change["before"])
    after = "(removed)" if change["kind"] == "removed" else compact(change["after"])
    return f"{dotted(change['path'])}: {before} → {after}"

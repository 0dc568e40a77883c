"""What the ``corral config`` verbs share: their options, ``TYPE[:REV]`` references, API paths,
write bodies, and the revision a write made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

import typer

from corral.cli.client import Client
from corral.domain.configs.config_type import ConfigType
from corral.errors import UserError

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


def parse_refs(args: Sequence[str], *, most: int) -> list[TypeRef]:
    """``TYPE[:REV]`` references as a user types them: ``POOL:2 POOL:3``, and ``POOL 2 3``
    (numbers after a type are its revisions). At most ``most`` of them."""
    refs: list[TypeRef] = []
    for text in args:
        if text.isdigit() and refs:
            latest = refs[-1]
            number = TypeRef(latest.ctype, _revision_number(text, latest.ctype))
            if latest.revision is None:
                refs[-1] = number  # POOL 2: the revision of the type just named
            else:
                refs.append(number)  # POOL 2 3, POOL:2 3: another revision of that type
        elif text.isdigit():
            raise UserError(
                f"{text!r} names no config type; write TYPE:{text} (e.g. POOL:{text}) or "
                f"TYPE {text}"
            )
        else:
            refs.append(parse_ref(text))
    if len(refs) > most:
        shown = " ".join(args)
        raise UserError(f"{shown!r} names {len(refs)} revisions; give at most {most}, e.g. POOL:2")
    return refs


def _revision_number(text: str, ctype: ConfigType) -> int:
    if int(text) < 1:
        raise UserError(f"Invalid revision {text!r}: revisions start at 1, e.g. {ctype.value}:1")
    return int(text)


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

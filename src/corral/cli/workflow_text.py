"""A workflow as ``corral workflow query`` and ``submit --dry-run`` print it: its header, its
groups, its tasks with their messages and earlier attempts; a dry run's objects and where each
group would go."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import yaml

from corral.cli.client import Client
from corral.cli.output import echo, local_time, print_table


def dashboard_page(client: Client, found: dict[str, Any]) -> str:
    """The workflow's page in the dashboard (what the server says, else at the CLI's URL)."""
    given = found.get("dashboard_url")
    return str(given) if given else f"{client.url}/ui/workflows/{quote(found['name'], safe='')}"


def print_workflow(found: dict[str, Any], client: Client) -> None:
    """The workflow's header, its groups (status, domain) and its tasks (where, how, when)."""
    echo(f"Workflow ID : {found['name']}")
    echo(f"Dashboard   : {dashboard_page(client, found)}")
    echo(f"Status      : {found['status']}")
    echo(f"Pool        : {found['pool']}")
    echo(f"Priority    : {found['priority']}")
    echo(f"Submitted by: {found['submitted_by']} at {local_time(found['submit_time'])}")
    if found.get("start_time"):
        echo(f"Started     : {local_time(found['start_time'])}")
    if found.get("end_time"):
        echo(f"Ended       : {local_time(found['end_time'])}")
    if found.get("cancel_requested_by"):
        echo(f"Canceled by : {found['cancel_requested_by']}")
    if found.get("message"):
        echo(f"Message     : {found['message']}")
    for group in found["groups"]:
        if group.get("start_forecast"):
            echo(f"Queue       : {group['name']}: {group['start_forecast']}")
    echo()
    print_table(
        ["Group", "Status", "Domain", "Upstream"],
        [
            [
                group["name"],
                group["status"],
                domain_text(group.get("domains") or {}),
                ", ".join(group["upstream"]) or "-",
            ]
            for group in found["groups"]
        ],
    )
    echo()
    rows = [
        [
            task["name"],
            group["name"],
            task["status"],
            task.get("node") or "-",
            "-" if task.get("exit_code") is None else str(task["exit_code"]),
            str(task["retry_id"]),
            local_time(task["start_time"]) if task.get("start_time") else "-",
            local_time(task["end_time"]) if task.get("end_time") else "-",
            task.get("message") or "-",
        ]
        for group in found["groups"]
        for task in group["tasks"]
    ]
    print_table(
        ["Task", "Group", "Status", "Node", "Exit code", "Retry", "Started", "Ended", "Message"],
        rows,
    )
    earlier = [
        [
            task["name"],
            str(attempt["retry_id"]),
            attempt.get("node") or "-",
            local_time(attempt["start_time"]) if attempt.get("start_time") else "-",
            local_time(attempt["end_time"]),
            "-" if attempt.get("exit_code") is None else str(attempt["exit_code"]),
            attempt.get("message") or "-",
        ]
        for group in found["groups"]
        for task in group["tasks"]
        for attempt in task.get("attempts") or ()
    ]
    if earlier:
        echo()
        echo("Earlier attempts (corral workflow logs ID --task TASK --retry-id N prints one):")
        print_table(["Task", "Retry", "Node", "Started", "Ended", "Exit code", "Why"], earlier)


def domain_text(domains: dict[str, str]) -> str:
    """The group's own domain, then each subgroup's (``set: domain``); ``-`` before placement.
    Each is its finest level's value (a domain is the dotted path from the coarsest level:
    ``--format json`` gives it whole)."""
    own = [leaf(domains[""])] if domains.get("") else []
    subgroups = [f"{name}: {leaf(domains[name])}" for name in domains if name]
    return ", ".join(own + subgroups) or "-"


def leaf(domain: str) -> str:
    return domain.rsplit(".", 1)[-1]


def print_dry_run(found: dict[str, Any]) -> None:
    echo(f"# Workflow {found['name']} (dry run: nothing was stored)")
    echo(f"# pool {found['pool']}, namespace {found['namespace']}, priority {found['priority']}")
    for group in found["groups"]:
        echo()
        upstream = f", after {', '.join(group['upstream'])}" if group["upstream"] else ""
        echo(
            f"# group {group['name']} ({len(group['manifests'])} objects, in creation order"
            f"{upstream})"
        )
        placement = group.get("placement")
        if placement is not None:
            echo(f"# {placement_line(placement)}")
        print_manifests(group["manifests"])


def placement_line(placement: dict[str, Any]) -> str:
    """Where a dry run's group would be placed now: its domain and nodes, what it would evict,
    or why it would wait."""
    if placement.get("verdict") == "never":
        return f"could never run: {placement['reason']}"
    if placement["reason"] is not None:
        return f"now: would wait: {placement['reason']}"
    domains = placement["domains"]
    where = f" in domain {domains['']}" if domains.get("") else ""
    nodes = sorted(set(placement["nodes"].values()))
    text = f"now: would run{where} on {len(nodes)} node{'s' if len(nodes) != 1 else ''}"
    text += f" ({', '.join(nodes[:8])}{', ...' if len(nodes) > 8 else ''})"
    evicts = placement["evicts"]
    if evicts:
        victims = ", ".join(
            f"{e['workflow_id']} ({e['gpus']} GPUs{', reclaimed' if e['reclaimed'] else ''})"
            for e in evicts
        )
        text += f", evicting {victims}"
    return text


def print_manifests(manifests: list[dict[str, Any]]) -> None:
    for manifest in manifests:
        echo("---")
        echo(yaml.safe_dump(manifest, sort_keys=False).rstrip())

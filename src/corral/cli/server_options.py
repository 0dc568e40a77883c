"""The options of ``corral server``: what each flag is, its environment variable and help.

Kept apart from the verb (``server_cmd.py``) as one table; the defaults are the verb's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from corral.services.workers.server_logs import LogLevel

HostOption = Annotated[str, typer.Option(help="Address to listen on.")]

PortOption = Annotated[int, typer.Option(help="Port to listen on.")]

DataDirOption = Annotated[
    Path | None,
    typer.Option(help="Where the embedded SQLite database lives [default: the user data dir]."),
]

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        envvar="CORRAL_DATABASE_URL",
        help="Use this database instead of SQLite, e.g. postgresql+psycopg://user@host/db. "
        "A URL with a password must come from CORRAL_DATABASE_URL or --database-url-file: "
        "every user of the machine can read a command line.",
    ),
]

DatabaseUrlFileOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="Read the database URL from FILE, which only its owner may read (mode 0600).",
    ),
]

TaskDirOption = Annotated[
    Path | None,
    typer.Option(
        help="Where local-process tasks get their directories and logs; servers that share "
        "a database must share it to take over each other's tasks [default: DATA_DIR/tasks].",
    ),
]

DemoOption = Annotated[bool, typer.Option(help="Load the example configs at start.")]

ClusterOption = Annotated[
    Path | None,
    typer.Option(
        metavar="FILE",
        help="The nodes of the embedded backend: a cluster description or a Kubernetes "
        "NodeList (docs/cluster.md) [default: the example cluster].",
    ),
]

OidcIssuerOption = Annotated[
    str | None,
    typer.Option(envvar="CORRAL_OIDC_ISSUER", help="Trust tokens signed by this OIDC issuer."),
]

OidcAudienceOption = Annotated[
    str | None,
    typer.Option(envvar="CORRAL_OIDC_AUDIENCE", help="Audience the issuer's tokens must name."),
]

OidcJwksUrlOption = Annotated[
    str | None,
    typer.Option(
        envvar="CORRAL_OIDC_JWKS_URL", help="The issuer's JWKS [default: from discovery]."
    ),
]

TickSecondsOption = Annotated[
    float,
    typer.Option(
        min=0.01,
        help="How often the lifecycle controller advances workflows, in seconds.",
    ),
]

OidcGroupsClaimOption = Annotated[
    str,
    typer.Option(envvar="CORRAL_OIDC_GROUPS_CLAIM", help="Claim listing the user's groups."),
]

LeaseSecondsOption = Annotated[
    float,
    typer.Option(
        envvar="CORRAL_LEASE_SECONDS",
        min=1.0,
        help="How long the controller lease lasts: with several servers on one database, "
        "a standby takes over this long after the leader stops renewing it.",
    ),
]

LogLevelOption = Annotated[
    LogLevel,
    typer.Option(
        envvar="CORRAL_LOG_LEVEL",
        help="Least important log lines written (debug adds one line per controller tick).",
    ),
]

AccessLogOption = Annotated[
    bool,
    typer.Option(
        "--access-log/--no-access-log",
        envvar="CORRAL_ACCESS_LOG",
        help="Write a log line per request (method, route, status, time); without it, "
        "requests are logged at the debug level only.",
    ),
]

MaxBodyBytesOption = Annotated[
    int,
    typer.Option(
        envvar="CORRAL_MAX_BODY_BYTES",
        min=1024,
        help="Largest request body accepted, in bytes; larger ones get 413.",
    ),
]

MaxHeaderBytesOption = Annotated[
    int,
    typer.Option(
        envvar="CORRAL_MAX_HEADER_BYTES",
        min=1024,
        help="Largest request head (request line and headers) accepted, in bytes; a larger "
        "one gets 431 before the rest is read.",
    ),
]

HeaderTimeoutOption = Annotated[
    float,
    typer.Option(
        envvar="CORRAL_HEADER_TIMEOUT",
        min=0.1,
        help="Seconds a client has to send a request's headers (from its first byte, or "
        "from connecting); then 408 and the connection closes.",
    ),
]

BodyTimeoutOption = Annotated[
    float,
    typer.Option(
        envvar="CORRAL_BODY_TIMEOUT",
        min=0.1,
        help="Seconds a request body may pause between two parts; then 408.",
    ),
]

ClientConnectionsOption = Annotated[
    int,
    typer.Option(
        envvar="CORRAL_MAX_CONNECTIONS_PER_CLIENT",
        min=1,
        help="Open connections allowed from one client address; more get 429 (raise it "
        "behind a proxy, whose connections all come from one address).",
    ),
]

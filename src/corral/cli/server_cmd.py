"""``corral server``: start the control plane."""

from __future__ import annotations

import dataclasses
import errno
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import platformdirs
import typer
from rich.console import Console
from rich.markup import escape

from corral.api.connection_limits import ConnectionLimits
from corral.cli import server_options as opt
from corral.credentials import credentials_file, read_token, server_key, store_token
from corral.errors import UserError
from corral.files import read_private_text
from corral.services.workers.server_logs import LogLevel, configure_logging

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

    from corral.api.auth import AuthSettings
    from corral.api.guard import RequestLimits
    from corral.services.lifecycle.process import ControllerSettings
    from corral.services.runtime import Runtime

ADMIN_TOKEN_NAME = "local-admin"
console = Console(stderr=True)


def examples_directory() -> Path:
    """The example configs: in the source tree, or packaged inside the wheel."""
    source_tree = Path(__file__).resolve().parents[3] / "examples" / "configs"
    packaged = Path(__file__).resolve().parents[1] / "_examples" / "configs"
    return source_tree if source_tree.is_dir() else packaged


def ensure_admin_token(runtime: Runtime, url: str) -> Path | None:
    """Keep the stored local admin token if the server still knows it; otherwise mint one."""
    existing = read_token(url)
    if existing and runtime.tokens.owner(existing) is not None:
        return None
    name = f"{ADMIN_TOKEN_NAME}@{server_key(url)}"
    runtime.tokens.revoke_named(name)
    token = runtime.tokens.create(name=name, username="admin", roles=["osmo-admin"])
    return store_token(url, token)


#: services.leadership.DEFAULT_TTL_SECONDS (not imported: other verbs start without it).
DEFAULT_LEASE_SECONDS = 5.0
#: How long a thread holding the GIL runs before another thread that waits for it gets it.
SWITCH_INTERVAL_SECONDS = 0.0005
CLIENT_CONNECTIONS = ConnectionLimits.max_connections_per_client


SUPPORTED_DATABASES = ("sqlite", "postgresql")


def _listen_or_exit(host: str, port: int) -> socket.socket:
    """The server's listening socket; a port in use (or a host that is not this machine's)
    stops the server here, before it touches the database."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        listening = socket.create_server((host, port), family=family)
        # Accepted connections inherit it: without, a keep-alive client waits ~40 ms per
        # request (Nagle's algorithm against delayed ACKs).
        listening.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return listening
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            reason = f"port {port} on {host} is in use (another corral server?)"
            hint = f"stop what uses it, or choose another port: --port {port + 1}"
        else:
            reason = f"cannot listen on {host}:{port}: {err.strerror or err}"
            hint = "check --host (an address of this machine, or 0.0.0.0) and --port"
        console.print(f"[red]error:[/] {escape(reason)}; {escape(hint)}.", soft_wrap=True)
        raise typer.Exit(1) from None


def _record_exit_signals() -> list[int]:
    """Handlers for SIGINT and SIGTERM that only record them. Uvicorn shuts down on either and
    then raises it again with the handler it found: the default one killed the process before
    the controller had stopped and given its lease up (a standby then waited the whole lease)."""
    received: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda found, _frame: received.append(found))
    return received


def _start_controller(runtime: Runtime, settings: ControllerSettings) -> Callable[[], None]:
    """Start the lifecycle controller in a child process (docs/lifecycle.md#the-controller-process).
    The callable stops it."""
    from corral.services.lifecycle.process import ControllerProcess

    runtime.lease_holder = settings.holder
    process = ControllerProcess(settings)
    process.start()
    return process.stop


def say(text: str) -> None:
    """One line of the start banner, never wrapped: a path or token must stay whole to be
    copied."""
    console.print(text, soft_wrap=True, highlight=False, markup=False)


def print_banner(
    address: str, database_url: str, token_file: Path | None, sign_in: str | None = None
) -> None:
    """Where the server listens, which database it uses, where the admin token is, how
    people log in to the dashboard (``sign_in``: the identity provider, with single sign-on),
    and the line that points another shell's CLI at it."""
    reachable = server_key(address)  # 0.0.0.0 is reached at 127.0.0.1
    if database_url.startswith("postgresql"):
        database = "PostgreSQL"
    else:
        database = "SQLite in " + database_url.split("///", 1)[-1]
    say(f"corral listening on {address} (database: {database})")
    if token_file:
        say(f"Admin token written to {token_file} (mode 0600); the CLI finds it there.")
    how = f"sign in through {sign_in}, or log in" if sign_in else "log in"
    say(
        f"Dashboard: {reachable}/ui ({how} with an API token: the admin token is in "
        f"{credentials_file()})"
    )
    say("Point the CLI at this server from another shell with:")
    say(f"  export CORRAL_URL={reachable}")


def _given_database_url(ctx: typer.Context, flag: str | None, file: Path | None) -> str | None:
    """The database URL from CORRAL_DATABASE_URL, --database-url-file or --database-url; a
    password on the command line, or a URL file others may read, stops the server here."""
    source = ctx.get_parameter_source("database_url")
    on_command_line = flag is not None and source is not None and source.name == "COMMANDLINE"
    if file is not None:
        if on_command_line:
            _exit_with("give the database URL once: --database-url or --database-url-file")
        return _read_url_file(file)
    if on_command_line and flag is not None and _has_password(flag):
        _exit_with(
            "--database-url holds a password, and every user of this machine can read a "
            "command line (ps, /proc/PID/cmdline); put the URL in the environment "
            "(CORRAL_DATABASE_URL) or in a file only you can read (--database-url-file FILE, "
            "chmod 600 FILE)"
        )
    return flag


def _refuse_unshared_sqlite(url: str | None) -> None:
    """The controller runs in a process of its own: an in-memory SQLite database, which only
    one process sees, would leave it with an empty database of its own."""
    from corral.store.database import is_sqlite_file

    parsed = _parsed_url(url)
    sqlite = parsed is not None and parsed.get_backend_name() == "sqlite"
    if sqlite and parsed is not None and not is_sqlite_file(parsed.database):
        _exit_with(
            f"--database-url {url} is not a file, and the server's controller runs in a "
            "process of its own that must open the same database; give a file "
            "(sqlite:////PATH/corral.db) or omit --database-url"
        )


def _has_password(url: str) -> bool:
    parsed = _parsed_url(url)
    return parsed is not None and (parsed.password is not None or "password" in parsed.query)


def _parsed_url(url: str | None) -> URL | None:
    """``url`` parsed; None when there is none or it is not a URL (refused as such when it is
    opened)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not url:
        return None
    try:
        return make_url(url)
    except ArgumentError:
        return None


def _read_url_file(file: Path) -> str:
    try:
        text = read_private_text(file, "--database-url-file")
    except UserError as err:
        _exit_with(err.message)
    if not text:
        _exit_with(f"--database-url-file {file} is empty; write the database URL in it")
    return text


def _exit_with(reason: str) -> NoReturn:
    console.print(f"[red]error:[/] {escape(reason)}.", highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _open_or_exit(url: str, cluster_file: Path | None, work_dir: Path, data_dir: Path) -> Runtime:
    """Open the database, or explain in one line why not (no traceback for a bad URL)."""
    from sqlalchemy.exc import SQLAlchemyError

    from corral.errors import CorralError
    from corral.services.runtime import example_cluster_file, open_runtime, read_cluster

    try:
        cluster = read_cluster(cluster_file or example_cluster_file())
    except CorralError as err:
        console.print(f"[red]error:[/] {escape(err.message)}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None

    scheme = url.split(":", 1)[0].split("+", 1)[0]
    if scheme not in SUPPORTED_DATABASES:
        console.print(
            f"[red]error:[/] --database-url {scheme}://... is not supported; use "
            "postgresql+psycopg://USER@HOST/DB (or omit it for SQLite)."
        )
        raise typer.Exit(2)
    try:
        return open_runtime(url, cluster=cluster, work_dir=work_dir, private=[data_dir])
    except (SQLAlchemyError, OSError) as err:
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        console.print(
            f"[red]error:[/] cannot open the database ({reason}). Check --database-url "
            "or --data-dir."
        )
        raise typer.Exit(1) from None


def server(
    ctx: typer.Context,
    host: opt.HostOption = "127.0.0.1",
    port: opt.PortOption = 8000,
    data_dir: opt.DataDirOption = None,
    database_url: opt.DatabaseUrlOption = None,
    database_url_file: opt.DatabaseUrlFileOption = None,
    task_dir: opt.TaskDirOption = None,
    demo: opt.DemoOption = False,
    cluster: opt.ClusterOption = None,
    oidc_issuer: opt.OidcIssuerOption = None,
    oidc_audience: opt.OidcAudienceOption = None,
    oidc_jwks_url: opt.OidcJwksUrlOption = None,
    tick_seconds: opt.TickSecondsOption = 0.5,
    oidc_groups_claim: opt.OidcGroupsClaimOption = "groups",
    lease_seconds: opt.LeaseSecondsOption = DEFAULT_LEASE_SECONDS,
    log_level: opt.LogLevelOption = LogLevel.INFO,
    access_log: opt.AccessLogOption = False,
    max_body_bytes: opt.MaxBodyBytesOption = 10 * 2**20,
    max_header_bytes: opt.MaxHeaderBytesOption = ConnectionLimits.max_header_bytes,
    header_timeout: opt.HeaderTimeoutOption = ConnectionLimits.header_timeout,
    body_timeout: opt.BodyTimeoutOption = ConnectionLimits.body_timeout,
    max_connections_per_client: opt.ClientConnectionsOption = CLIENT_CONNECTIONS,
) -> None:
    """Start the control plane (API on HOST:PORT)."""
    # Imported here so that every other `corral` verb starts without the server stack.
    from corral.api.guard import RequestLimits
    from corral.services.lifecycle.leadership import new_holder_id
    from corral.services.lifecycle.process import ControllerSettings
    from corral.services.runtime import load_examples
    from corral.services.workers.gc_settings import tune_gc
    from corral.services.workers.hardening import protect_server_process
    from corral.store.database import sqlite_url

    configure_logging(log_level)
    tune_gc()
    # A request waits for the GIL each time it comes back from the database or a sandbox
    # worker; while another thread computes, each wait lasted up to the default 5 ms switch
    # interval, a dozen times per submission.
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)
    listening = _listen_or_exit(host, port)  # before anything is opened or written
    given_url = _given_database_url(ctx, database_url, database_url_file)
    _refuse_unshared_sqlite(given_url)
    directory = data_dir or Path(platformdirs.user_data_dir("corral"))
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    auth = _auth_settings(directory, oidc_issuer, oidc_audience, oidc_jwks_url, oidc_groups_claim)
    url = given_url or sqlite_url(directory)
    protect_server_process()  # no process of this user can read our memory or environment
    runtime = _open_or_exit(url, cluster, task_dir or directory / "tasks", directory)
    if demo:
        result = load_examples(runtime, examples_directory())
        loaded = ", ".join(f"{r.config_type.value} r{r.revision}" for r in result.revisions)
        say(f"Example configs loaded ({loaded or 'already up to date'}).")
    address = f"http://{host}:{port}"
    written = ensure_admin_token(runtime, address)
    print_banner(address, url, written, _sign_in(auth))
    controller = _start_controller(
        runtime,
        ControllerSettings(
            database_url=url,
            cluster_file=str(cluster) if cluster else None,
            work_dir=str(task_dir or directory / "tasks"),
            data_dir=str(directory),
            tick_seconds=tick_seconds,
            lease_seconds=lease_seconds,
            holder=new_holder_id(),
            log_level=log_level.value,
        ),
    )
    limits = ConnectionLimits(
        max_header_bytes, header_timeout, body_timeout, max_connections_per_client
    )
    _serve(runtime, controller, listening, auth, RequestLimits(max_body_bytes), limits, access_log)


def _sign_in(auth: AuthSettings) -> str | None:
    """Whom people sign in through, with single sign-on (None: none)."""
    client = auth.oidc_client
    if client is None or auth.oidc is None:
        return None
    return client.provider_name or auth.oidc.issuer


def _auth_settings(
    directory: Path,
    issuer: str | None,
    audience: str | None,
    jwks_url: str | None,
    groups_claim: str,
) -> AuthSettings:
    """The session key from ``directory`` (or the environment), and the OIDC issuer trusted."""
    from corral.api.auth import AuthSettings
    from corral.services.auth.oidc import OidcSettings

    try:
        auth = AuthSettings.from_env(directory)
    except UserError as err:
        _exit_with(err.message.rstrip("."))
    if issuer:
        username_claim = auth.oidc.username_claim if auth.oidc else None
        oidc = OidcSettings(issuer, audience, jwks_url, groups_claim, username_claim)
        auth = dataclasses.replace(auth, oidc=oidc)
        say(f"Trusting tokens of the OIDC issuer {issuer}.")
    if auth.oidc_client is not None:
        if auth.oidc is None:
            _exit_with("CORRAL_OIDC_CLIENT_ID is set without CORRAL_OIDC_ISSUER: set both")
        say(f"People sign in through {auth.oidc.issuer} (client {auth.oidc_client.client_id}).")
    return auth


def _serve(
    runtime: Runtime,
    stop_controller: Callable[[], None],
    listening: socket.socket,
    auth: AuthSettings,
    request_limits: RequestLimits,
    connection_limits: ConnectionLimits,
    access_log: bool,
) -> None:
    """Serve until a signal; then stop the controller, close the backends, and exit as the
    signal says."""
    import uvicorn

    from corral.api.connections import bounded_protocol
    from corral.web.app import create_server_app, warm_views

    received = _record_exit_signals()
    try:
        app = create_server_app(runtime, auth, request_limits, access_log=access_log)
        warm_views(runtime)
        protocol = bounded_protocol(connection_limits)
        uvicorn.Server(uvicorn.Config(app, log_level="warning", http=protocol)).run(
            sockets=[listening]
        )
    finally:
        stop_controller()  # stops ticking before the lease is given up
        runtime.backends.close()  # Kubernetes watches and clients
    for signum in received:  # exit as the signal says, now that everything is closed
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)

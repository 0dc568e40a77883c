"""An in-process fake Kubernetes API server for tests.

Real HTTP on 127.0.0.1 (uvicorn in a background thread), real Kubernetes paths and JSON
shapes, so the real ``lightkube`` client and the real ``kubectl`` talk to it unchanged. The
object semantics (validation, resourceVersions, patches, server-side apply, finalizers,
watches) live in ``fake_store``; this module is the HTTP layer plus test-facing helpers:
fault injection, RBAC denials, pod logs, direct object access and the write journal.

    with FakeKubeServer() as server:
        client = Client(KubeConfig.from_file(server.write_kubeconfig(tmp_path / "kubeconfig")))
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import uvicorn
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.backends.kubernetes.fake_store import (
    CRD_TYPE,
    Change,
    Denial,
    JournalEntry,
    KubeError,
    Obj,
    ResourceType,
    Selector,
    Store,
    parse_field_selector,
    parse_label_selector,
)

USER = "system:serviceaccount:corral:corral"
KUBERNETES_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-fake",
    "platform": "linux/amd64",
}
AUTHZ_GROUP = "authorization.k8s.io"
SSAR = "selfsubjectaccessreviews"
PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    "application/apply-patch+yaml": "apply",
}
WATCH_POLL_SECONDS = 0.01
VERBS = ("create", "get", "list", "update", "patch", "delete", "apply", "watch")


@dataclass
class Fault:
    """The next ``times`` requests matching verb/kind/name fail with ``status`` (or wait
    ``delay`` seconds, then proceed normally)."""

    verb: str
    kind: str | None
    name: str | None
    status: int
    delay: float
    times: int

    def matches(self, verb: str, rtype: ResourceType, name: str | None) -> bool:
        kinds = (rtype.kind.lower(), rtype.plural)
        return (
            self.verb == verb
            and (self.kind is None or self.kind.lower() in kinds)
            and (self.name is None or self.name == name)
        )


@dataclass(frozen=True)
class Target:
    """What a resource URL names."""

    rtype: ResourceType
    version: str
    namespace: str | None
    name: str | None
    subresource: str | None


class FakeKubeServer:
    """A kube-apiserver stand-in; see the module docstring. Thread-safe; reusable via
    ``reset()`` so a test session needs only one."""

    def __init__(self, history_limit: int = 1000) -> None:
        self.store = Store(history_limit)
        self.user = USER
        self._faults: list[Fault] = []
        self._stopping = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port = 0
        self.app = Starlette(
            routes=[
                Route(
                    "/{path:path}",
                    self._handle,
                    methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                )
            ]
        )

    # lifecycle

    def start(self) -> FakeKubeServer:
        """Serve on a free port of 127.0.0.1 from a daemon thread; returns once listening."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self._port = sock.getsockname()[1]
        self._stopping.clear()
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            daemon=True,
            name="fake-kube-apiserver",
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the fake Kubernetes API server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving; open watches end within one poll interval."""
        self._stopping.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> FakeKubeServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """A kubeconfig for this server with a dummy bearer token (no TLS, no auth checks)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
            "current-context": "fake",
            "preferences": {},
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    # test helpers

    def reset(self) -> None:
        """A fresh cluster: default namespaces and CRDs only; no faults, denials or logs."""
        with self.store.lock:
            self._faults.clear()
            self.store.reset()

    @property
    def journal(self) -> list[JournalEntry]:
        with self.store.lock:
            return list(self.store.journal)

    def objects(
        self, api_version: str | None = None, kind: str | None = None, namespace: str | None = None
    ) -> list[Obj]:
        """Stored objects (deep copies) in creation order, optionally filtered."""
        return [
            obj
            for obj in self.store.all_objects()
            if (api_version is None or obj.get("apiVersion") == api_version)
            and (kind is None or obj.get("kind") == kind)
            and (namespace is None or obj["metadata"].get("namespace") == namespace)
        ]

    def get_object(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> Obj | None:
        try:
            return self.store.get(self.store.type_of(api_version, kind), namespace, name)
        except KubeError as error:
            if error.code == 404:
                return None
            raise

    def put_object(self, manifest: Obj) -> Obj:
        """Create or replace from Python (validated, with watch events), status included."""
        manifest = copy.deepcopy(manifest)
        rtype = self.store.type_of(manifest["apiVersion"], manifest["kind"])
        meta = manifest.setdefault("metadata", {})
        namespace = meta.setdefault("namespace", "default") if rtype.namespaced else None
        with self.store.lock:
            if self.get_object(manifest["apiVersion"], manifest["kind"], namespace, meta["name"]):
                obj = self.store.update(
                    rtype, namespace, meta["name"], manifest, "fake-kube-test", check_version=False
                )
            else:
                obj = self.store.create(rtype, namespace, manifest, "fake-kube-test")
            if "status" in manifest and "status" in rtype.subresources:
                obj = self.update_status(
                    obj["apiVersion"], obj["kind"], namespace, meta["name"], manifest["status"]
                )
            return obj

    def update_status(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        status: Obj,
        manager: str = "fake-kube-controller",
    ) -> Obj:
        """Replace ``status`` like the kubelet or a scheduler would (a MODIFIED event)."""
        rtype = self.store.type_of(api_version, kind)
        with self.store.lock:
            current = self.store.get(rtype, namespace, name)
            current["status"] = copy.deepcopy(status)
            return self.store.update(
                rtype, namespace, name, current, manager, subresource="status", check_version=False
            )

    def create_namespace(self, name: str) -> Obj:
        return self.store.create_namespace(name)

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        with self.store.lock:
            self.store.pod_logs[(namespace, name)] = text

    def add_crd(self, crd: Obj) -> None:
        self.store.add_crd(crd)

    def remove_crd(self, group: str, plural: str) -> None:
        self.store.remove_crd(group, plural)

    def compact(self) -> None:
        """Forget the watch history: resuming from an older resourceVersion gets 410."""
        self.store.compact()

    def deny(self, verb: str, group: str, resource: str, namespace: str | None = None) -> None:
        """Refuse ``verb`` on ``resource`` (``pods``, ``pods/log``; ``*`` matches anything), in
        ``namespace`` or everywhere: in SelfSubjectAccessReviews and with 403 on requests."""
        with self.store.lock:
            self.store.denials.append(Denial(verb, group, resource, namespace))

    def allow_all(self) -> None:
        with self.store.lock:
            self.store.denials.clear()

    def inject_fault(
        self,
        verb: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        status: int = 500,
        delay: float = 0.0,
        times: int = 1,
    ) -> None:
        """Fail (or, when ``delay`` > 0, delay) the next ``times`` matching requests."""
        if verb not in VERBS:
            raise ValueError(f"verb must be one of {VERBS}, not {verb!r}")
        with self.store.lock:
            self._faults.append(Fault(verb, kind, name, status, delay, times))

    # HTTP

    async def _handle(self, request: Request) -> Response:
        try:
            return await self._dispatch(request)
        except KubeError as error:
            return JSONResponse(error.status(), status_code=error.code)

    async def _dispatch(self, request: Request) -> Response:
        parts = [p for p in request.url.path.split("/") if p]
        discovery = self._discovery(parts)
        if discovery is not None:
            if request.method != "GET":
                raise KubeError(405, f"{request.method} is not allowed on {request.url.path}")
            return JSONResponse(discovery)
        if parts == ["apis", AUTHZ_GROUP, "v1", SSAR] and request.method == "POST":
            return JSONResponse(self._access_review(await _json_body(request)), status_code=201)
        target = self._target(parts)
        verb, rbac_verb = _verbs(request, target)
        if verb not in ("get", "list", "watch") and target.rtype.key == CRD_TYPE.key:
            raise KubeError(405, "the fake serves CustomResourceDefinitions read-only")
        body = await self._body(request, verb)
        name = target.name or ((body or {}).get("metadata") or {}).get("name")
        await self._apply_faults(verb, target.rtype, name)
        self._authorize(rbac_verb, target)
        if request.query_params.get("dryRun"):
            raise KubeError(400, "dryRun is not supported by the fake API server")
        return await self._serve(request, verb, target, body)

    async def _serve(self, request: Request, verb: str, target: Target, body: Any) -> Response:
        store, rtype, ns, name = self.store, target.rtype, target.namespace, target.name
        params = request.query_params
        manager = params.get("fieldManager") or _user_agent_manager(request)
        if verb == "watch":
            return self._watch(request, target)
        if verb == "list":
            items, rv = store.select(rtype, ns, _selector(request, rtype))
            return JSONResponse(_list_body(rtype, target.version, items, rv))
        if verb == "get" and target.subresource == "log":
            return PlainTextResponse(self._pod_log(ns or "", name or ""))
        if verb == "get":
            return JSONResponse(store.get(rtype, ns, name or ""))
        if verb == "create":
            if ns is None and rtype.namespaced:
                raise KubeError(405, f"create {rtype.plural} needs a namespace in the URL")
            return JSONResponse(store.create(rtype, ns, body, manager), status_code=201)
        if verb == "update":
            updated = store.update(
                rtype, ns, name or "", body, manager, subresource=target.subresource
            )
            return JSONResponse(updated)
        if verb == "patch":
            patch_type = PATCH_TYPES[_content_type(request)]
            patched = store.patch(
                rtype, ns, name or "", patch_type, body, manager, target.subresource
            )
            return JSONResponse(patched)
        if verb == "apply":
            if not params.get("fieldManager"):
                raise KubeError(400, "fieldManager is required for apply requests")
            obj, created = store.apply(
                rtype,
                ns,
                name or "",
                body,
                manager,
                force=params.get("force") in ("true", "1"),
                subresource=target.subresource,
            )
            return JSONResponse(obj, status_code=201 if created else 200)
        if verb == "delete" and name is None:
            return JSONResponse(self._delete_collection(request, target))
        return JSONResponse(self._delete(request, target, body))

    def _target(self, parts: list[str]) -> Target:
        """Parse ``/api/v1/...`` or ``/apis/{group}/{version}/...`` into what it names."""
        not_found = KubeError(404, "the server could not find the requested resource")
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise not_found
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            candidate = self.store.find_type(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise not_found
        rtype = self.store.find_type(group, version, rest[0])
        if rtype is None or (namespace is None and rtype.namespaced and len(rest) > 1):
            raise not_found
        subresource = rest[2] if len(rest) == 3 else None
        if subresource is not None and subresource not in rtype.subresources:
            raise not_found
        name = rest[1] if len(rest) >= 2 else None
        return Target(rtype, version, namespace, name, subresource)

    async def _body(self, request: Request, verb: str) -> Any:
        if verb in ("create", "update", "patch"):
            return await _json_body(request)
        if verb == "apply":
            try:
                return yaml.safe_load(await request.body())
            except yaml.YAMLError as error:
                raise KubeError(400, f"invalid apply configuration: {error}") from error
        if verb == "delete":
            raw = await request.body()
            return json.loads(raw) if raw.strip() else {}
        return None

    async def _apply_faults(self, verb: str, rtype: ResourceType, name: str | None) -> None:
        with self.store.lock:
            fault = next((f for f in self._faults if f.matches(verb, rtype, name)), None)
            if fault is not None:
                fault.times -= 1
                if fault.times <= 0:
                    self._faults.remove(fault)
        if fault is None:
            return
        if fault.delay > 0:
            await asyncio.sleep(fault.delay)
            return
        raise KubeError(
            fault.status, f"injected fault: {verb} {rtype.qualified} {name or ''}".strip()
        )

    def _denied(self, verb: str, group: str, resource: str, namespace: str | None) -> bool:
        with self.store.lock:
            return any(d.covers(verb, group, resource, namespace) for d in self.store.denials)

    def _authorize(self, verb: str, target: Target) -> None:
        """403 with the message RBAC gives, when a denial covers the request."""
        rtype = target.rtype
        resource = rtype.plural + (f"/{target.subresource}" if target.subresource else "")
        if not self._denied(verb, rtype.group, resource, target.namespace):
            return
        who = (
            f'{rtype.qualified} "{target.name}"'
            if target.name and verb != "create"
            else rtype.qualified
        )
        where = (
            f'in the namespace "{target.namespace}"' if target.namespace else "at the cluster scope"
        )
        raise KubeError(
            403,
            f'{who} is forbidden: User "{self.user}" cannot {verb} resource "{resource}" in API '
            f'group "{rtype.group}" {where}',
            details={"name": target.name or "", "group": rtype.group, "kind": rtype.plural},
        )

    def _access_review(self, review: Obj) -> Obj:
        attributes = (review.get("spec") or {}).get("resourceAttributes")
        allowed = True
        if attributes:
            resource = attributes.get("resource", "")
            if attributes.get("subresource"):
                resource += "/" + attributes["subresource"]
            allowed = not self._denied(
                attributes.get("verb", ""),
                attributes.get("group", ""),
                resource,
                attributes.get("namespace") or None,
            )
        result = copy.deepcopy(review)
        result.update(apiVersion=f"{AUTHZ_GROUP}/v1", kind="SelfSubjectAccessReview")
        result.setdefault("metadata", {})
        result["status"] = {"allowed": allowed}
        if not allowed:
            result["status"]["reason"] = "denied by the fake API server"
        return result

    def _pod_log(self, namespace: str, name: str) -> str:
        with self.store.lock:
            pod = self.store.get(self.store.types[("", "pods")], namespace, name)
            log = self.store.pod_logs.get((namespace, name))
        if log is None and pod.get("status", {}).get("phase") == "Pending":
            container = pod["spec"]["containers"][0]["name"]
            raise KubeError(
                400,
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        return log or ""

    def _delete(self, request: Request, target: Target, options: Obj) -> Obj:
        store, rtype, ns, name = self.store, target.rtype, target.namespace, target.name or ""
        grace = options.get("gracePeriodSeconds", request.query_params.get("gracePeriodSeconds"))
        with store.lock:
            current = store.get(rtype, ns, name)
            preconditions = options.get("preconditions") or {}
            for field_name in ("uid", "resourceVersion"):
                expected = preconditions.get(field_name)
                actual = current["metadata"][field_name]
                if expected and expected != actual:
                    raise KubeError(
                        409,
                        f"Precondition failed: {field_name} in precondition: {expected}, "
                        f"{field_name} in object meta: {actual}",
                    )
            return store.delete(rtype, ns, name, int(grace or 0))

    def _delete_collection(self, request: Request, target: Target) -> Obj:
        with self.store.lock:
            items, _ = self.store.select(
                target.rtype, target.namespace, _selector(request, target.rtype)
            )
            deleted = [
                self.store.delete(target.rtype, target.namespace, item["metadata"]["name"])
                for item in items
            ]
            return _list_body(target.rtype, target.version, deleted, self.store.resource_version)

    # watch

    def _watch(self, request: Request, target: Target) -> Response:
        """Newline-delimited watch events: replay, then live ones until timeout or shutdown."""
        selector = _selector(request, target.rtype)
        rv_param = request.query_params.get("resourceVersion") or "0"
        timeout = float(request.query_params.get("timeoutSeconds") or 0)
        lines: list[Obj] = []
        with self.store.lock:
            if rv_param == "0":
                items, start = self.store.select(target.rtype, target.namespace, selector)
                lines = [{"type": "ADDED", "object": item} for item in items]
            else:
                try:
                    start = int(rv_param)
                except ValueError as error:
                    raise KubeError(400, f"invalid resourceVersion {rv_param!r}") from error
        stream = self._watch_stream(request, target, selector, lines, start, timeout)
        return StreamingResponse(stream, media_type="application/json")

    async def _watch_stream(
        self,
        request: Request,
        target: Target,
        selector: Selector,
        initial: list[Obj],
        start: int,
        timeout: float,
    ) -> AsyncIterator[bytes]:
        for added in initial:
            yield _line(added)
        deadline = time.monotonic() + timeout if timeout > 0 else None
        last, polls = start, 0
        while not self._stopping.is_set():
            if deadline is not None and time.monotonic() >= deadline:
                return
            try:
                changes = self.store.changes_after(last)
            except KubeError as error:
                yield _line({"type": "ERROR", "object": error.status()})
                return
            for change in changes:
                last = change.rv
                event = _watch_event(change, target, selector)
                if event is not None:
                    yield _line(event)
            polls += 1
            if polls % 50 == 0 and await request.is_disconnected():
                return
            await asyncio.sleep(WATCH_POLL_SECONDS)

    # discovery

    def _discovery(self, parts: list[str]) -> Obj | None:
        """``/version``, ``/api``, ``/apis`` and the per-group-version resource lists."""
        if parts == ["version"]:
            return KUBERNETES_VERSION
        if parts == ["api"]:
            address = f"127.0.0.1:{self._port}"
            return {
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": address}
                ],
            }
        if parts == ["api", "v1"]:
            return self._resource_list("", "v1")
        groups = self._groups()
        if parts == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups.values())}
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **groups[parts[1]]}
        if len(parts) == 3 and parts[0] == "apis" and parts[1] in groups:
            versions = [v["version"] for v in groups[parts[1]]["versions"]]
            return self._resource_list(parts[1], parts[2]) if parts[2] in versions else None
        return None

    def _groups(self) -> dict[str, Obj]:
        versions: dict[str, list[str]] = {AUTHZ_GROUP: ["v1"]}
        with self.store.lock:
            for rtype in self.store.types.values():
                if rtype.group:
                    known = versions.setdefault(rtype.group, [])
                    known += [v for v in rtype.versions if v not in known]
        for names in versions.values():
            names.sort(key=_version_priority, reverse=True)
        return {
            group: {
                "name": group,
                "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in names],
                "preferredVersion": {"groupVersion": f"{group}/{names[0]}", "version": names[0]},
            }
            for group, names in versions.items()
        }

    def _resource_list(self, group: str, version: str) -> Obj:
        resources: list[Obj] = []
        if group == AUTHZ_GROUP:
            resources.append(
                {
                    "name": SSAR,
                    "singularName": "selfsubjectaccessreview",
                    "namespaced": False,
                    "kind": "SelfSubjectAccessReview",
                    "verbs": ["create"],
                }
            )
        with self.store.lock:
            types = [
                t for t in self.store.types.values() if t.group == group and version in t.versions
            ]
        for rtype in types:
            entry: Obj = {
                "name": rtype.plural,
                "singularName": rtype.singular,
                "namespaced": rtype.namespaced,
                "kind": rtype.kind,
                "verbs": list(rtype.verbs),
            }
            if rtype.short_names:
                entry["shortNames"] = list(rtype.short_names)
            resources.append(entry)
            for sub in sorted(rtype.subresources):
                verbs = ["get"] if sub == "log" else ["get", "patch", "update"]
                resources.append(
                    {
                        "name": f"{rtype.plural}/{sub}",
                        "singularName": "",
                        "namespaced": rtype.namespaced,
                        "kind": rtype.kind,
                        "verbs": verbs,
                    }
                )
        group_version = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }


def _verbs(request: Request, target: Target) -> tuple[str, str]:
    """``(verb for faults, verb for RBAC)``: apply is a fault verb but RBAC's ``patch``."""
    method, name, sub = request.method, target.name, target.subresource
    params = request.query_params
    if method == "GET":
        if name is not None:
            return ("get", "get")
        verb = "watch" if params.get("watch") in ("true", "1") else "list"
        return (verb, verb)
    if method == "POST" and name is None:
        return ("create", "create")
    if method == "PUT" and name is not None:
        return ("update", "update")
    if method == "PATCH" and name is not None:
        content_type = _content_type(request)
        if content_type not in PATCH_TYPES:
            raise KubeError(
                415, f"the body of the request was in an unknown format - {content_type}"
            )
        return ("apply" if PATCH_TYPES[content_type] == "apply" else "patch", "patch")
    if method == "DELETE":
        return ("delete", "delete" if name is not None else "deletecollection")
    if sub == "log" and method != "GET":
        raise KubeError(405, "pods/log only supports get")
    raise KubeError(405, f"{method} is not allowed on {request.url.path}")


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version order: GA before beta before alpha, then by number (v2 > v1beta3)."""
    match = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if match is None:
        return (-1, 0, 0)
    stage = {"alpha": 0, "beta": 1}.get(match[2] or "", 2)
    return (stage, int(match[1]), int(match[3] or 0))


def _content_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def _json_body(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except ValueError as error:
        raise KubeError(400, f"the request body is not valid JSON: {error}") from error


def _user_agent_manager(request: Request) -> str:
    """The real default field manager: the client's User-Agent up to the first ``/``."""
    return request.headers.get("user-agent", "unknown").split("/")[0] or "unknown"


def _selector(request: Request, rtype: ResourceType) -> Selector:
    params = request.query_params
    return Selector(
        tuple(parse_label_selector(params.get("labelSelector"))),
        tuple(parse_field_selector(params.get("fieldSelector"), rtype)),
    )


def _list_body(rtype: ResourceType, version: str, items: list[Obj], rv: int) -> Obj:
    return {
        "kind": f"{rtype.kind}List",
        "apiVersion": rtype.api_version(version),
        "metadata": {"resourceVersion": str(rv)},
        "items": items,
    }


def _watch_event(change: Change, target: Target, selector: Selector) -> Obj | None:
    """The event a watcher of ``target`` sees: objects entering or leaving the selection are
    ADDED/DELETED for it, as with the real watch cache."""
    if change.resource != target.rtype.key:
        return None
    if target.namespace is not None and change.namespace != target.namespace:
        return None
    was, now = selector.matches(change.old), selector.matches(change.new)
    kind = change.type
    if change.type == "MODIFIED":
        kind = {(True, True): "MODIFIED", (False, True): "ADDED", (True, False): "DELETED"}.get(
            (was, now), ""
        )
    elif change.type == "DELETED":
        kind = "DELETED" if was or now else ""
    elif not now:
        kind = ""
    if not kind:
        return None
    obj = copy.deepcopy(change.new)
    obj["apiVersion"] = target.rtype.api_version(target.version)
    obj["kind"] = target.rtype.kind
    return {"type": kind, "object": obj}


def _line(event: Obj) -> bytes:
    return json.dumps(event, separators=(",", ":")).encode() + b"\n"

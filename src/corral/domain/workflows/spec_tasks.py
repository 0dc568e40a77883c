"""A workflow's tasks, read and checked (``spec_resources`` reads resource specs and timeouts,
``spec_parser`` the rest)."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from corral.domain.formats.signals import NOTICE_SIGNALS
from corral.domain.workflows.spec import (
    ExitAction,
    TaskFile,
    TaskInput,
    TaskOutput,
    TaskSpec,
)
from corral.domain.workflows.spec_reader import (
    CACHE_PERCENT,
    CHECKPOINT_KEYS,
    EXIT_ACTIONS,
    EXIT_CODES,
    FILE_KEYS,
    INPUT_KEYS,
    KPI_KEYS,
    OUTPUT_KEYS,
    RESERVED_TASK_NAME,
    TASK_KEYS,
    Path,
    Reader,
    k8s_name,
    kind_of,
)
from corral.domain.workflows.spec_resources import check_size, duration

# ----------------------------------------------------------------------------------- tasks


def parse_task(reader: Reader, raw: Any, path: Path) -> TaskSpec:
    if not isinstance(raw, dict):
        reader.fail(
            path, f"a task must be a mapping with name, image and command, not {kind_of(raw)}."
        )
    if "resources" in raw:
        reader.fail(
            (*path, "resources"),
            'tasks have no "resources" field: define the resources under workflow.resources '
            'and name the entry with "resource: <name>".',
        )
    body = reader.mapping(raw, path, TASK_KEYS)
    name = reader.name(reader.required(body, "name", path), (*path, "name"), "Task")
    if k8s_name(name) == RESERVED_TASK_NAME:
        reader.fail(
            (*path, "name"),
            f'Task name "{name}" is reserved for OSMO\'s control container; choose another name.',
        )
    image = reader.string(reader.required(body, "image", path), (*path, "image"))
    if not image.strip():
        reader.fail((*path, "image"), "the image is empty; name a container image.")
    if "command" not in body or body["command"] is None:
        reader.fail(path, f'Container {name} should have at least one command. Add "command:".')
    command = reader.string_list(body["command"], (*path, "command"), coerce=True)
    if not command:
        reader.fail((*path, "command"), f"Container {name} should have at least one command.")
    return TaskSpec(
        name=name,
        image=image,
        command=command,
        args=reader.string_list(body.get("args"), (*path, "args"), coerce=True),
        lead=reader.boolean(body.get("lead"), (*path, "lead"), False),
        environment=_parse_environment(reader, body.get("environment"), (*path, "environment")),
        credentials=_parse_credentials(reader, body.get("credentials"), (*path, "credentials")),
        inputs=_parse_inputs(reader, body.get("inputs"), (*path, "inputs")),
        outputs=_parse_outputs(reader, body.get("outputs"), (*path, "outputs")),
        files=_parse_files(reader, body.get("files"), (*path, "files")),
        volume_mounts=reader.string_list(body.get("volumeMounts"), (*path, "volumeMounts")),
        privileged=reader.boolean(body.get("privileged"), (*path, "privileged"), False),
        host_network=reader.boolean(body.get("hostNetwork"), (*path, "hostNetwork"), False),
        resource=_parse_resource_name(reader, body.get("resource"), (*path, "resource")),
        exit_actions=_parse_exit_actions(
            reader, name, body.get("exitActions"), (*path, "exitActions")
        ),
        cache_size=_parse_cache_size(reader, body.get("cacheSize"), (*path, "cacheSize")),
        stop_notice=(
            None
            if body.get("stopNotice") is None
            else duration(reader, body["stopNotice"], (*path, "stopNotice"))
        ),
        notice_signal=_parse_notice_signal(
            reader, body.get("noticeSignal"), (*path, "noticeSignal")
        ),
        extra=_parse_extra(reader, body, path),
    )


def _parse_notice_signal(reader: Reader, value: Any, path: Path) -> str | None:
    """A signal a local task takes notice by (docs/checkpoints.md#the-notice), or ""."""
    if value is None:
        return None
    signal = reader.string(value, path)
    if signal and signal not in NOTICE_SIGNALS:
        reader.fail(
            path,
            f"{signal!r} is not a notice signal: use one of {', '.join(NOTICE_SIGNALS)}, "
            'or "" for none.',
        )
    return signal


def _parse_resource_name(reader: Reader, value: Any, path: Path) -> str:
    return "default" if value is None else reader.string(value, path)


def _parse_environment(reader: Reader, value: Any, path: Path) -> dict[str, str]:
    environment = reader.mapping(value, path, None)
    result: dict[str, str] = {}
    for key, raw in environment.items():
        where = (*path, str(key))
        if not isinstance(key, str) or not key:
            reader.fail(where, f"environment variable name {key!r} must be non-empty text.")
        result[key] = reader.string(raw, where, coerce=True)
    return result


def _parse_credentials(
    reader: Reader, value: Any, path: Path
) -> dict[str, str | Mapping[str, str]]:
    credentials = reader.mapping(value, path, None)
    result: dict[str, str | Mapping[str, str]] = {}
    for key, raw in credentials.items():
        where = (*path, str(key))
        if not isinstance(key, str) or not key:
            reader.fail(where, f"credential name {key!r} must be non-empty text.")
        if isinstance(raw, dict):
            mapped: dict[str, str] = {}
            for env, cred_key in raw.items():
                if not isinstance(env, str) or not env:
                    reader.fail(
                        (*where, str(env)),
                        f"environment variable name {env!r} must be non-empty text.",
                    )
                mapped[env] = _credential_scalar(reader, cred_key, (*where, env))
            result[key] = mapped
        else:
            result[key] = _credential_scalar(reader, raw, where)
    return result


def _credential_scalar(reader: Reader, value: Any, path: Path) -> str:
    if isinstance(value, bool | int | float | str):
        return str(value)
    reader.fail(
        path,
        "must be a mount directory (text) or a mapping ENV_VAR: credential_key, "
        f"not {kind_of(value)}.",
    )


def _parse_inputs(reader: Reader, value: Any, path: Path) -> tuple[TaskInput, ...]:
    inputs: list[TaskInput] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where,
                f"an input must be a mapping {{task: ...}} or {{url: ...}}, not {kind_of(raw)}.",
            )
        body = reader.mapping(raw, where, INPUT_KEYS)
        has_task, has_url = body.get("task") is not None, body.get("url") is not None
        if has_task == has_url:
            reader.fail(
                where,
                'an input needs exactly one of "task" (a task name, or <workflow_id>:<task>) '
                'and "url".',
            )
        task = reader.string(body["task"], (*where, "task")) if has_task else None
        url = reader.string(body["url"], (*where, "url")) if has_url else None
        if task is not None and not all(part.strip() for part in task.split(":", 1)):
            reader.fail(
                (*where, "task"),
                f'input task "{task}" is incomplete; write <task> or <workflow_id>:<task>.',
            )
        if url is not None and not url.strip():
            reader.fail((*where, "url"), "the url is empty; give the data's URL.")
        inputs.append(TaskInput(task, url, reader.regex(body.get("regex"), (*where, "regex"))))
    return tuple(inputs)


def _parse_outputs(reader: Reader, value: Any, path: Path) -> tuple[TaskOutput, ...]:
    outputs: list[TaskOutput] = []
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(where, f"an output must be a mapping {{url: ...}}, not {kind_of(raw)}.")
        body = reader.mapping(raw, where, OUTPUT_KEYS)
        url = reader.string(reader.required(body, "url", where), (*where, "url"))
        if not url.strip():
            reader.fail((*where, "url"), "the url is empty; give where to upload the output.")
        outputs.append(TaskOutput(url, reader.regex(body.get("regex"), (*where, "regex"))))
    return tuple(outputs)


def _parse_files(reader: Reader, value: Any, path: Path) -> tuple[TaskFile, ...]:
    files: list[TaskFile] = []
    seen: set[str] = set()
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(where, f"a file must be a mapping {{path, contents}}, not {kind_of(raw)}.")
        body = reader.mapping(raw, where, FILE_KEYS)
        file_path = reader.string(reader.required(body, "path", where), (*where, "path"))
        _check_file_path(reader, file_path, (*where, "path"))
        if file_path in seen:
            reader.fail(
                (*where, "path"), f'file path "{file_path}" appears twice in this task; keep one.'
            )
        seen.add(file_path)
        if "localpath" in body:
            files.append(_local_file(reader, body, file_path, where))
            continue
        contents = reader.string(
            reader.required(body, "contents", where), (*where, "contents"), coerce=True
        )
        encoded = reader.boolean(body.get("base64"), (*where, "base64"), False)
        if encoded:
            try:
                base64.b64decode(contents, validate=True)
            except (binascii.Error, ValueError):
                reader.fail(
                    (*where, "contents"), "is not valid base64; encode it or set base64: false."
                )
        files.append(TaskFile(file_path, contents, encoded))
    return tuple(files)


def _local_file(reader: Reader, body: Mapping[str, Any], file_path: str, where: Path) -> TaskFile:
    """A ``files[]`` entry with ``localpath``: its contents come with the request (OSMO's CLI
    inlines the file; corral's sends it beside the workflow, so positions stay the same)."""
    if "contents" in body:
        reader.fail(
            (*where, "localpath"),
            "give either contents or localpath, not both (OSMO: Files tag dont support "
            "contents and localpath together).",
        )
    local = reader.string(body["localpath"], (*where, "localpath"))
    found = reader.local_files.get(local)
    if found is None:
        reader.fail(
            (*where, "localpath"),
            f"the local file {local} was not sent with the workflow: submit it with "
            "`corral workflow submit`, which reads localpath files (relative to the workflow "
            "file), or put the text in contents.",
        )
    return TaskFile(file_path, found.contents, found.base64)


def _check_file_path(reader: Reader, file_path: str, path: Path) -> None:
    segments = [segment for segment in file_path.split("/") if segment]
    if not segments:
        reader.fail(
            path, f'file path "{file_path}" is empty; give the file\'s path in the container.'
        )
    in_output = segments[:3] == ["osmo", "data", "output"] and len(segments) > 3
    if segments[0] == "osmo" and not (in_output and file_path.startswith("/")):
        reader.fail(
            path,
            f'file path "{file_path}" is inside /osmo, which is reserved; use another directory '
            "(only /osmo/data/output/... is allowed).",
        )


def _parse_exit_actions(
    reader: Reader, task: str, value: Any, path: Path
) -> tuple[ExitAction, ...]:
    actions = reader.mapping(value, path, None)
    result: list[ExitAction] = []
    seen: set[str] = set()
    for key, raw in actions.items():
        where = (*path, str(key))
        action = str(key).upper()
        if action not in EXIT_ACTIONS:
            hint = "; RESTART does not exist, use RESCHEDULE" if action == "RESTART" else ""
            reader.fail(
                where,
                f"Invalid exit action {key} for task {task}. Valid actions are "
                f"{', '.join(EXIT_ACTIONS)}{hint}.",
            )
        if action in seen:
            reader.fail(
                where,
                f"exit action {action} is given twice (keys are not case sensitive); merge them.",
            )
        seen.add(action)
        codes = (
            raw
            if isinstance(raw, str)
            else (str(raw) if isinstance(raw, int) and not isinstance(raw, bool) else None)
        )
        if codes is None or not EXIT_CODES.match(codes):
            reader.fail(
                where,
                f"Invalid exit codes {raw} for action {key} for task {task}. Write codes and "
                'inclusive ranges separated by commas, e.g. "0,1-10,16".',
            )
        result.append(ExitAction(action, _code_ranges(reader, codes, where)))
    return tuple(result)


def _code_ranges(reader: Reader, codes: str, path: Path) -> tuple[tuple[int, int], ...]:
    ranges: list[tuple[int, int]] = []
    for part in codes.split(","):
        low, _, high = part.partition("-")
        if len(low) > 10 or len(high) > 10:
            reader.fail(path, f"exit code {part} is too large.")
        start, end = int(low), int(high or low)
        if start > end:
            reader.fail(path, f"exit code range {part} is reversed; write {end}-{start}.")
        ranges.append((start, end))
    return tuple(ranges)


def _parse_cache_size(reader: Reader, value: Any, path: Path) -> str | None:
    if value is None:
        return None
    text = reader.string(value, path, coerce=not isinstance(value, bool))
    percent = CACHE_PERCENT.match(text)
    if percent:
        if int(percent[1]) > 100:
            reader.fail(path, f"cacheSize {text} is more than 100%; give 0% to 100% or a size.")
        return text
    check_size(reader, "cacheSize", text, path)
    return text


def _parse_extra(reader: Reader, body: Mapping[str, Any], path: Path) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if body.get("checkpoint") is not None:
        _check_checkpoints(reader, body["checkpoint"], (*path, "checkpoint"))
        extra["checkpoint"] = body["checkpoint"]
    if body.get("downloadType") is not None:
        if body["downloadType"] != "download":
            reader.fail((*path, "downloadType"), 'downloadType must be "download" or left out.')
        extra["downloadType"] = body["downloadType"]
    if body.get("kpis") is not None:
        for index, raw in enumerate(reader.sequence(body["kpis"], (*path, "kpis"))):
            where = (*path, "kpis", index)
            if not isinstance(raw, dict):
                reader.fail(where, f"a kpi must be a mapping {{index, path}}, not {kind_of(raw)}.")
            kpi = reader.mapping(raw, where, KPI_KEYS)
            for key in KPI_KEYS:
                reader.string(reader.required(kpi, key, where), (*where, key), coerce=True)
        extra["kpis"] = body["kpis"]
    return extra


def _check_checkpoints(reader: Reader, value: Any, path: Path) -> None:
    for index, raw in enumerate(reader.sequence(value, path)):
        where = (*path, index)
        if not isinstance(raw, dict):
            reader.fail(
                where,
                f"a checkpoint must be a mapping {{path, url, frequency}}, not {kind_of(raw)}.",
            )
        body = reader.mapping(raw, where, CHECKPOINT_KEYS)
        for key in ("path", "url"):
            reader.string(reader.required(body, key, where), (*where, key))
        duration(reader, reader.required(body, "frequency", where), (*where, "frequency"))
        reader.regex(body.get("regex"), (*where, "regex"))

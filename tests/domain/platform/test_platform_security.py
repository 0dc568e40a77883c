from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from corral.domain.configs.models import Platform
from corral.domain.platform.security import check_task_security, default_mounts, normalise_path
from corral.errors import CorralError, UserError

PLATFORM = Platform(allowed_mounts=["/data", "/scratch/", "/models"])
OPEN = Platform(privileged_allowed=True, host_network_allowed=True)
PROVIDED = ["/dev/shm", "/cache/"]


def _check(
    volume_mounts: list[str],
    *,
    platform: Platform = PLATFORM,
    privileged: bool = False,
    host_network: bool = False,
) -> list[tuple[str, str]]:
    return check_task_security(
        "train",
        "h100",
        platform,
        privileged=privileged,
        host_network=host_network,
        volume_mounts=volume_mounts,
        provided_mounts=PROVIDED,
    )


def test_default_mounts() -> None:
    template = {
        "spec": {
            "containers": [
                {"name": "osmo-ctrl", "volumeMounts": [{"mountPath": "/osmo"}]},
                {"name": "main", "volumeMounts": [{"mountPath": "/dev/shm"}, {"mountPath": "/a"}]},
                {"name": "side", "volumeMounts": [{"mountPath": "/a"}, {"mountPath": "/b"}]},
                {"name": "bare"},
                "junk",
            ]
        }
    }
    assert default_mounts(template) == ["/dev/shm", "/a", "/b"]


@pytest.mark.parametrize(
    "template",
    [{}, {"spec": None}, {"spec": {"containers": "x"}},
     {"spec": {"containers": [{"name": "m", "volumeMounts": [{"mountPath": 3}, "x"]}]}}],
)  # fmt: skip
def test_default_mounts_of_odd_templates(template: dict[str, Any]) -> None:
    assert default_mounts(template) == []


@pytest.mark.parametrize(
    "mounts, expected",
    [
        ([], []),
        (["/data"], [("/data", "/data")]),
        (["/data:/mnt/data"], [("/data", "/mnt/data")]),
        (["/data/"], [("/data", "/data")]),  # trailing slash
        (["/scratch"], [("/scratch", "/scratch")]),  # allowed with a trailing slash
        (["/models/./:/m//"], [("/models", "/m")]),
        (["/models:/m", "/data"], [("/models", "/m"), ("/data", "/data")]),
    ],
)
def test_allowed_mounts(mounts: list[str], expected: list[tuple[str, str]]) -> None:
    assert _check(mounts) == expected


def test_flags_allowed_on_an_open_platform() -> None:
    assert _check([], platform=OPEN, privileged=True, host_network=True) == []


@pytest.mark.parametrize(
    "mounts, flags, message",
    [
        ([], {"privileged": True},
         "Task with platform: h100 does not have privileged flag enabled. Task train"),
        ([], {"host_network": True},
         "Task with platform: h100 does not have hostNetwork flag enabled. Task train"),
        (["/a:/b:/c"], {}, "Invalid task volume mount: /a:/b:/c."),
        (["/a:"], {}, "Invalid task volume mount: /a:."),
        ([":/a"], {}, "Invalid task volume mount: :/a."),
        ([""], {}, "Invalid task volume mount: ."),
        (["/dev/shm"], {},
         "Mount /dev/shm is already provided by platform h100 and cannot be set in volumeMounts. "
         "Remove it from the task spec. Task train"),
        (["/cache:/c"], {},
         "Mount /cache is already provided by platform h100 and cannot be set in volumeMounts. "
         "Remove it from the task spec. Task train"),
        (["/etc"], {}, "Task with platform: h100 does not allow mount: /etc. Task train"),
        (["/etc/"], {}, "Task with platform: h100 does not allow mount: /etc/. Task train"),
        (["/data//x/./:/mnt/"], {},  # /data/x is not /data
         "Task with platform: h100 does not allow mount: /data//x/./. Task train"),
        (["/data", "/root:/r"], {},
         "Task with platform: h100 does not allow mount: /root. Task train"),
        (["data"], {},
         "Invalid task volume mount: data. 'data' is not an absolute path; write it from the "
         "root, e.g. /data."),
        (["/data:mnt"], {},
         "Invalid task volume mount: /data:mnt. 'mnt' is not an absolute path; write it from the "
         "root, e.g. /data."),
        (["/data/../etc"], {},
         "Invalid task volume mount: /data/../etc. '/data/../etc' contains '..'; write the path "
         "without it."),
        (["/data:/mnt/.."], {},
         "Invalid task volume mount: /data:/mnt/... '/mnt/..' contains '..'; write the path "
         "without it."),
    ],
)  # fmt: skip
def test_security_errors(mounts: list[str], flags: dict[str, bool], message: str) -> None:
    with pytest.raises(UserError) as caught:
        _check(mounts, **flags)
    assert caught.value.message == message


def test_privileged_is_checked_before_mounts() -> None:
    with pytest.raises(UserError, match="privileged"):
        _check(["/etc"], privileged=True, host_network=True)


@pytest.mark.parametrize(
    "path, expected",
    [("/data/", "/data"), ("/data//x/./", "/data/x"), ("/", "/"), ("//", "/"), ("a/b/", "a/b")],
)
def test_normalise_path(path: str, expected: str) -> None:
    assert normalise_path(path) == expected


@given(st.lists(st.text(alphabet="/.:ab", max_size=12), max_size=4), st.booleans())
def test_mount_fuzz(mounts: list[str], privileged: bool) -> None:
    try:
        result = _check(mounts, platform=OPEN if privileged else PLATFORM)
    except CorralError:
        return
    for source, destination in result:
        assert source.startswith("/") and destination.startswith("/")
        assert ".." not in source.split("/") and ".." not in destination.split("/")

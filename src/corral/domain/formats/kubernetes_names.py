"""Kubernetes syntax rules used when validating configs."""

from __future__ import annotations

import re

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid Kubernetes label key, or None if it is."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        return "the prefix before '/' is empty"
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"prefix {prefix!r} is not a DNS subdomain (lowercase letters, digits, '-', '.')"
    if not name:
        return "the name part is empty"
    if len(name) > 63:
        return f"the name part {name!r} is longer than 63 characters"
    if not _LABEL_NAME.match(name):
        return (
            f"the name part {name!r} must start and end with a letter or digit and contain "
            "only letters, digits, '-', '_' or '.'"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid Kubernetes label value, or None if it is."""
    if len(value) > 63:
        return f"{value!r} is longer than 63 characters"
    if value and not _LABEL_NAME.match(value):
        return (
            f"{value!r} must start and end with a letter or digit and contain only letters, "
            "digits, '-', '_' or '.'"
        )
    return None

"""The config types, without what parsing them needs (the CLI names types in its arguments;
importing the models, pydantic and the Kubernetes schemas cost it half a second a call)."""

from __future__ import annotations

from enum import StrEnum

from corral.errors import UserError


class ConfigType(StrEnum):
    POOL = "POOL"
    POD_TEMPLATE = "POD_TEMPLATE"
    GROUP_TEMPLATE = "GROUP_TEMPLATE"
    RESOURCE_VALIDATION = "RESOURCE_VALIDATION"
    ROLE = "ROLE"
    BACKEND = "BACKEND"
    WORKFLOW = "WORKFLOW"

    @property
    def label(self) -> str:
        """As in messages: "Pool", "Pod template"."""
        return _NAMES[self][0]

    @property
    def bundle_key(self) -> str | None:
        """Its key in a bundle or a wrapped document; None for WORKFLOW (a single object)."""
        return _NAMES[self][1]

    @property
    def singleton(self) -> bool:
        return self.bundle_key is None

    @property
    def url_segment(self) -> str:
        return self.value.lower()

    @classmethod
    def parse(cls, text: str) -> ConfigType:
        """Accept ``POOL``, ``pool``, ``pod-template``; reject anything else with the list."""
        normalized = text.strip().upper().replace("-", "_")
        try:
            return cls(normalized)
        except ValueError:
            raise UserError(
                f"Unknown config type {text!r}. Config types: {', '.join(t.value for t in cls)}"
            ) from None


#: Each type's label and bundle key (how each is parsed is ``types.py``'s: it needs the models).
_NAMES: dict[ConfigType, tuple[str, str | None]] = {
    ConfigType.POOL: ("Pool", "pools"),
    ConfigType.POD_TEMPLATE: ("Pod template", "pod_templates"),
    ConfigType.GROUP_TEMPLATE: ("Group template", "group_templates"),
    ConfigType.RESOURCE_VALIDATION: ("Resource validation", "resource_validations"),
    ConfigType.ROLE: ("Role", "roles"),
    ConfigType.BACKEND: ("Backend", "backends"),
    ConfigType.WORKFLOW: ("Workflow config", None),
}

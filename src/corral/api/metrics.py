"""Prometheus metrics, one registry per app so that several apps can live in one process."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram

from corral.services.config_service import WriteResult


@dataclass
class Metrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.requests = Counter(
            "corral_http_requests",
            "HTTP requests served",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "corral_http_request_duration_seconds",
            "Time to serve an HTTP request",
            ["method", "route"],
            registry=self.registry,
        )
        self.config_writes = Counter(
            "corral_config_revisions",
            "Config revisions recorded",
            ["config_type"],
            registry=self.registry,
        )

    def count_write(self, result: WriteResult) -> None:
        """Count each revision a config write recorded, by type."""
        for revision in result.revisions:
            self.config_writes.labels(revision.config_type.value).inc()

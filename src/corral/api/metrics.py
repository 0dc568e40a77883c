"""Prometheus metrics, one registry per app so that several apps can live in one process."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from corral.domain.views.forecast_accuracy import PoolAccuracy, Refresh, cpu_share
from corral.services.config_writes import WriteResult


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

        # Totals kept in the database (any server's controller writes them): set when scraped.
        self.node_fault_groups = Gauge(
            "corral_node_fault_groups",
            "Task groups a node fault stopped (ended or placed again), since the database was made",
            ["pool"],
            registry=self.registry,
        )
        self.node_fault_gpu_seconds = Gauge(
            "corral_node_fault_gpu_seconds_lost",
            "GPU-seconds of work lost to node faults: each stopped group's GPUs times how "
            "long it had run",
            ["pool"],
            registry=self.registry,
        )

        self.eviction_gangs = Gauge(
            "corral_eviction_stops",
            "Gangs a preemption, a reclaim or a drain stopped, since the database was made",
            ["pool", "cause"],
            registry=self.registry,
        )
        self.eviction_gpu_seconds = Gauge(
            "corral_eviction_gpu_seconds_lost",
            "GPU-seconds of work those stops lost: each gang's GPUs times the seconds from its "
            "latest checkpoint (or its start) to its stop",
            ["pool", "cause"],
            registry=self.registry,
        )
        self.eviction_acknowledged = Gauge(
            "corral_eviction_stops_acknowledged",
            "Of those stops, the ones whose every task said it was ready before the deadline",
            ["pool", "cause"],
            registry=self.registry,
        )

        self._forecast_gauges()

    def _forecast_gauges(self) -> None:
        """How good the published forecasts were and what refreshing them costs
        (docs/forecast.md#accuracy)."""
        self.forecast_band_hits = Gauge(
            "corral_forecast_band_hits_ratio",
            "Share of the published forecasts whose start fell inside their 80% band, over the "
            "pool's latest starts",
            ["pool"],
            registry=self.registry,
        )
        self.forecast_median_error = Gauge(
            "corral_forecast_median_error_ratio",
            "Median |forecast median - actual start| / actual wait, over the pool's latest starts",
            ["pool"],
            registry=self.registry,
        )
        self.forecast_starts = Gauge(
            "corral_forecast_measured_starts",
            "Starts the pool's forecast accuracy is measured over",
            ["pool"],
            registry=self.registry,
        )
        self.forecast_cpu = Gauge(
            "corral_forecast_refresh_cpu_seconds",
            "CPU seconds the latest forecast refresh took (its simulation)",
            registry=self.registry,
        )
        self.forecast_cpu_share = Gauge(
            "corral_forecast_cpu_share",
            "Share of one core the latest forecast refreshes took: their CPU over the time "
            "they span",
            registry=self.registry,
        )

    def set_forecast_figures(self, accuracy: list[PoolAccuracy], refreshes: list[Refresh]) -> None:
        for pool in accuracy:
            self.forecast_band_hits.labels(pool.pool).set(pool.band_hits_ratio)
            self.forecast_starts.labels(pool.pool).set(pool.starts)
            if pool.median_error is not None:
                self.forecast_median_error.labels(pool.pool).set(pool.median_error)
        if refreshes:
            self.forecast_cpu.set(refreshes[-1].cpu_seconds)
        self.forecast_cpu_share.set(cpu_share(refreshes))

    def set_eviction_losses(self, losses: dict[tuple[str, str], tuple[int, float, int]]) -> None:
        """Per (pool, cause), (gangs, GPU-seconds lost, acknowledged) as
        ``WorkflowStore.eviction_losses`` reads them."""
        for (pool, cause), (gangs, lost, acknowledged) in losses.items():
            self.eviction_gangs.labels(pool, cause).set(gangs)
            self.eviction_gpu_seconds.labels(pool, cause).set(lost)
            self.eviction_acknowledged.labels(pool, cause).set(acknowledged)

    def set_node_fault_losses(self, losses: dict[str, tuple[int, float]]) -> None:
        """Per pool, (groups, GPU-seconds) as ``WorkflowStore.node_fault_losses`` reads them."""
        for pool, (groups, gpu_seconds) in losses.items():
            self.node_fault_groups.labels(pool).set(groups)
            self.node_fault_gpu_seconds.labels(pool).set(gpu_seconds)

    def count_write(self, result: WriteResult) -> None:
        """Count each revision a config write recorded, by type."""
        for revision in result.revisions:
            self.config_writes.labels(revision.config_type.value).inc()

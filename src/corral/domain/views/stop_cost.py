"""What a gang's stop by a preemption, a reclaim or a drain cost (docs/checkpoints.md#what-a-
stop-cost), as ``workflow explain`` says it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StopCost:
    lost_gpu_seconds: float
    acknowledged: bool
    stop_seconds: float

    def text(self) -> str:
        """``lost 0.25 GPU-h since its last checkpoint; stopped 2.1 s after its notice (every
        task was ready)``."""
        how = "every task was ready" if self.acknowledged else "at its deadline"
        return (
            f"lost {self.lost_gpu_seconds / 3600:.2f} GPU-h since its last checkpoint; stopped "
            f"{self.stop_seconds:.1f} s after its notice ({how})"
        )

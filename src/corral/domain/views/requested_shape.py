"""What a waiting group asks for, in one phrase: its pods, GPUs and topology constraints
(``scheduler/podgroup.py`` reads them from its stored PodGroup and pods): ``16 x 4 GPUs,
required gpu-clique``. The queue shows it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestedShape:
    pods: int
    gpus: int
    #: The GPUs of each pod when all ask the same; None when they differ.
    pod_gpus: int | None
    #: ``required gpu-clique``, ``preferred rack``, joined by ``; `` when nested ("": none).
    topology: str

    @property
    def text(self) -> str:
        if self.pod_gpus is not None:
            size = f"{self.pods} x {self.pod_gpus} GPUs"
        else:
            size = f"{self.pods} pods, {self.gpus} GPUs"
        return f"{size}, {self.topology}" if self.topology else size

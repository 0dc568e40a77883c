"""The kubernetes backend end to end: workflows submitted over the API run on the fake API
server through lightkube, placed by a fake KAI, run by a fake kubelet."""

from __future__ import annotations

from tests.kube.kube_world import KubeWorld


def test_smoke(kube_world: KubeWorld) -> None:
    w = kube_world
    wf = w.submit_example("nvl72-single-rack.yaml")
    w.run_cycles(lambda: w.workflow(wf).status == "RUNNING")
    print(
        [
            (o["kind"], o["metadata"]["name"])
            for o in w.fake.objects()
            if o["kind"] in ("Queue", "Topology")
        ]
    )
    w.run_cycles(
        lambda: w.workflow(wf).status == "COMPLETED" and not w.group_objects(), code_of=lambda p: 0
    )
    print([(j.verb, j.kind, j.name) for j in w.fake.journal if j.kind not in ("Node",)])

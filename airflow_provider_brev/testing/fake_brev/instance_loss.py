"""The ``instance_lost`` fault: a RUNNING instance vanishes (``mode="deleted"``: gone from ``ls``, its name free
again) or fails (``mode="failure"``: status FAILURE until ``brev delete``), and every process of its sandbox is
SIGKILLed, as when a VM dies.

Triggers (one per fault): ``after_seconds`` of simulated time RUNNING (from when it became RUNNING or when the fault
was armed, whichever is later), ``when_file`` (a glob relative to the sandbox HOME matches) or ``at_epoch`` (the fake
TAO ``train`` in that instance finished that 0-based epoch, its status record and checkpoint written). Nothing runs
in the background: every ``brev`` command, an attached ``brev exec`` while it streams, ``set_fault`` and the fake TAO
after each epoch evaluate the armed losses, so a lost instance's job dies no later than the next poll.
"""

from __future__ import annotations

import glob
import os
import time

from airflow_provider_brev.testing.fake_brev.store import (
    StateStore,
    derive,
    kill_marked,
    load_config,
    record_phase,
    sandbox_dir,
)

KIND = "instance_lost"
MODES = ("deleted", "failure")


def _due(root: str, fault: dict, inst: dict, now: float, epoch: int | None, epoch_instance: str | None) -> bool:
    if fault.get("instance") not in (None, inst["name"], inst["id"]) or derive(inst, now)["status"] != "RUNNING":
        return False
    if fault.get("at_epoch") is not None:
        return epoch is not None and epoch_instance == inst["id"] and epoch >= int(fault["at_epoch"])
    if fault.get("when_file"):
        pattern = str(fault["when_file"]).removeprefix("~/")
        return bool(glob.glob(os.path.join(sandbox_dir(root, inst["id"]), "home", pattern)))
    since = max(float(inst["t_running"]), float(fault.get("armed_at") or 0.0))
    return now >= since + float(fault.get("after_seconds") or 0.0)


def _due_pairs(
    root: str, st: dict, now: float, epoch: int | None, epoch_instance: str | None
) -> list[tuple[dict, dict]]:
    faults = [f for f in st["faults"] if f.get("kind") == KIND and (f.get("times") is None or f["times"] > 0)]
    return [(f, i) for f in faults for i in st["instances"] if _due(root, f, i, now, epoch, epoch_instance)]


def lose_due_instances(root: str, epoch: int | None = None, epoch_instance: str | None = None) -> list[str]:
    """Fire every armed ``instance_lost`` fault that is due (each loses at most one instance per use); returns the
    ids of the instances lost, whose sandbox processes are killed (except the calling process)."""
    store = StateStore(root)
    try:
        seen = store.read()
        if not any(f.get("kind") == KIND for f in seen["faults"]):
            return []
        now = time.time() + float(load_config(root).get("now_offset") or 0.0)
        if not _due_pairs(root, seen, now, epoch, epoch_instance):
            return []
        lost: list[str] = []
        with store.txn(now=now) as st:
            for fault, inst in _due_pairs(root, st, now, epoch, epoch_instance):
                if inst["id"] in lost or (fault.get("times") is not None and fault["times"] <= 0):
                    continue
                if fault.get("times") is not None:
                    fault["times"] -= 1
                lost.append(inst["id"])
                if fault.get("mode", "deleted") == "failure":
                    inst["failure"] = fault.get("message") or "instance lost: the VM stopped responding"
                else:
                    inst.update(last_build="COMPLETED", phase="delete", t_deleting=now, t_gone=now)
                    record_phase(inst, "delete", now, now)
            st["faults"] = [f for f in st["faults"] if f.get("times") is None or f["times"] > 0]
    finally:
        store.close()
    for ident in lost:
        kill_marked(("BREV_SIM_INSTANCE", ident))
    return lost

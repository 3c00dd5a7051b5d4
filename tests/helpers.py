"""Small assertion helpers shared by the DAG-level tests."""

from __future__ import annotations


def task_states(dag_run) -> dict[str, str]:
    """``{task_id: state}`` of a finished DagRun (``dag.test()`` does not raise when tasks fail)."""
    states = {}
    for ti in dag_run.get_task_instances():
        state = ti.state
        states[ti.task_id] = getattr(state, "value", state)
    return states


def run_state(dag_run) -> str:
    return getattr(dag_run.state, "value", dag_run.state)


def cli_calls(sim, command: str) -> list[dict]:
    """Real invocations of ``brev <command>`` from the simulator's call log (``--help`` probes excluded)."""
    return [
        call
        for call in sim.calls()
        if next((a for a in call["argv"] if not a.startswith("-")), None) == command
        and not {"--help", "-h"} & set(call["argv"])
    ]

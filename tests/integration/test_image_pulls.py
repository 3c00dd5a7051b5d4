"""Background image pulls: a TAO step's pull runs while its inputs sync, the images later steps on the same instance
declare are pulled ahead (each once), and a failed background pull fails the step that needs the image.

Real ``dag.test()`` runs against the simulator and moto. Ordering comes from the simulator's own records (the fake
``docker``'s call log, the ``brev`` call log): the fake pull of an absent image completes only once the input
manifest exists (``pull_gate``), so a step that waited for its pull before syncing its inputs could not finish.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from helpers import run_state, task_states, wait_for_no_instances

from airflow_provider_brev.testing.datasets import upload_synthetic_vcn_dataset

NGC_KEY = "ngc-key-" + "77c1" * 8
DATASET_PREFIX = "datasets/vcn/"
TRAIN_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
EVALUATE_IMAGE = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt-eval"
IMAGE_BYTES = {TRAIN_IMAGE: 7_000_000_000, EVALUATE_IMAGE: 3_000_000_000}
#: How long the fake pull waits for the input manifest before it fails like a registry timeout. It ends the test only
#: when the step never syncs its inputs while pulling; a busy machine (several suites at once) took over 30 s to sync.
PULL_GATE_SECONDS = 300


@pytest.fixture
def tao_data(aws_connection, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    upload_synthetic_vcn_dataset(aws_connection.client, aws_connection.bucket, DATASET_PREFIX)
    return aws_connection


def run(run_dag, aws):
    return run_dag("brev_pull_two_images", conf={"bucket": aws.bucket, "dataset_prefix": DATASET_PREFIX})


def ti_of(dag_run, task_id):
    return next(ti for ti in dag_run.get_task_instances() if ti.task_id == task_id)


def ends(call) -> float:
    return float(call["ts"]) + float(call["duration"])


@pytest.mark.parametrize("brev_sim_both", ["released", "documented"], indirect=True)
def test_the_pull_runs_while_the_inputs_sync_and_later_images_are_pulled_ahead_once(run_dag, brev_sim_both, tao_data):
    sim = brev_sim_both
    sim.set_docker(
        image_bytes=IMAGE_BYTES, pull_gate="vcn/data/.brev-manifest.jsonl", pull_gate_timeout=PULL_GATE_SECONDS
    )
    dag_run = run(run_dag, tao_data)
    assert run_state(dag_run) == "success", task_states(dag_run)
    pulls = {call["argv"][-1]: call for call in sim.docker_calls(subcommand="pull")}
    assert Counter(call["argv"][-1] for call in sim.docker_calls(subcommand="pull")) == {
        TRAIN_IMAGE: 1,
        EVALUATE_IMAGE: 1,
    }
    assert {image: call["exit_code"] for image, call in pulls.items()} == {TRAIN_IMAGE: 0, EVALUATE_IMAGE: 0}
    assert sum(call["bytes"] for call in pulls.values()) == sum(IMAGE_BYTES.values())  # each image downloaded once
    # train's pull started before its inputs were written to the instance and ended after the sync's manifest
    (manifest,) = [c for c in sim.calls("copy") if any(a.endswith("vcn/data/.brev-manifest.jsonl") for a in c["argv"])]
    train_pull = pulls[TRAIN_IMAGE]
    assert float(train_pull["ts"]) < float(manifest["ts"]) <= ends(train_pull)
    # evaluate's image was pulled while train's container ran, not after it
    (train_run,) = [c for c in sim.docker_calls(subcommand="run") if TRAIN_IMAGE in c["argv"]]
    assert float(pulls[EVALUATE_IMAGE]["ts"]) < ends(train_run)
    evaluate = ti_of(dag_run, "evaluate").xcom_pull(task_ids="evaluate")
    assert evaluate["image"] == EVALUATE_IMAGE
    wait_for_no_instances(sim)


def test_a_failed_background_pull_fails_the_step_that_needs_the_image(run_dag, brev_sim, tao_data, task_logs):
    brev_sim.set_docker(fail_pull=[EVALUATE_IMAGE])
    dag_run = run(run_dag, tao_data)
    states = task_states(dag_run)
    assert states["train"] == "success" and states["evaluate"] == "failed", states  # train's prefetch failed quietly
    assert ti_of(dag_run, "evaluate").try_number == 1
    assert "BrevImagePullError" in task_logs.text
    assert f"Pulling {EVALUATE_IMAGE} on " in task_logs.text and "Client.Timeout exceeded" in task_logs.text
    failed = [c for c in brev_sim.docker_calls(subcommand="pull") if c["argv"][-1] == EVALUATE_IMAGE]
    assert [c["exit_code"] for c in failed] == [1, 1]  # train's pull ahead, then evaluate's own
    assert not [run for run in brev_sim.tao_runs() if run.get("action") == "evaluate"]  # nothing ran without it
    wait_for_no_instances(brev_sim)

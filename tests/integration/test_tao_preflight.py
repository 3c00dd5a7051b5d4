"""Each pre-launch failure stops the run before any `brev create`, naming the missing piece."""

from __future__ import annotations

import json
import time

import pytest
from helpers import cli_calls, task_states


@pytest.fixture
def ngc(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": "ngc-key-1234567"}))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_HF_DEFAULT", raising=False)


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({"backbone": "hf_model://nvidia/C-RADIOv2-B"}, "references Hugging Face but no token"),
        ({"input_paths": ["/home/me/dataset"]}, "are not on the Brev instance"),
    ],
)
def test_preflight_failure_stops_before_create(run_dag, brev_sim, ngc, task_logs, conf, expected):
    conf = {"backbone": "/results/backbone.safetensors", "input_paths": [], "instance_paths": [], **conf}
    dag_run = run_dag("brev_tao_preflight", conf=conf)
    assert task_states(dag_run)["preflight"] == "failed"
    assert expected in task_logs.text
    assert cli_calls(brev_sim, "create") == []


def test_preflight_passes_with_hf_token_and_declared_paths(run_dag, brev_sim, ngc, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 20)
    conf = {"backbone": "hf_model://nvidia/C-RADIOv2-B", "input_paths": ["/data/x"], "instance_paths": ["/data/x"]}
    dag_run = run_dag("brev_tao_preflight", conf=conf)
    assert task_states(dag_run)["preflight"] == "success"


def test_declared_instance_path_is_verified_before_gpu_work(run_dag, brev_sim, ngc, task_logs):
    dag_run = run_dag("brev_tao_ephemeral_train")
    assert task_states(dag_run)["train"] == "failed"
    assert "do not exist on" in task_logs.text
    assert brev_sim.docker_calls(subcommand="run") == []  # no GPU work started
    deadline = time.monotonic() + 20
    while brev_sim.instances():
        assert time.monotonic() < deadline, brev_sim.instances()
        time.sleep(0.05)

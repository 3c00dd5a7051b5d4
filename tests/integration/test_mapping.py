"""Dynamic task mapping with a non-default connection: ``.partial(brev_conn_id=...).expand(...)`` on every operator
and the sensor, and ``.expand(aws_conn_id=..., ngc_conn_id=...)`` over the other connections of the preflight and
TAO operators (tests/integration/dags/brev_mapping_cases.py), run for real with ``dag.test()`` against the simulator and moto.

``brev_default`` points at a CLI that does not exist, so a task that ignored ``brev_conn_id`` would fail. Airflow
accepts in ``.partial()`` only the arguments of ``BaseOperator`` subclasses' ``__init__``: before
``brev_conn_id`` was declared there (not in a mixin), the DAG file did not even import.
"""

from __future__ import annotations

import json
import os

from helpers import cli_calls, run_state, task_states, wait_for_no_instances

from airflow_provider_brev.testing.datasets import synthetic_vcn_files

NGC_KEY = "ngc-key-" + "5c1e" * 8


def test_every_operator_maps_on_a_non_default_connection(run_dag, brev_sim, aws_connection, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_BREV_ALT", brev_sim.connection_json())
    broken = json.loads(brev_sim.connection_json())
    broken["extra"] = {**broken.get("extra", {}), "cli_path": str(tmp_path / "no-such-brev")}
    monkeypatch.setenv("AIRFLOW_CONN_BREV_DEFAULT", json.dumps(broken))
    monkeypatch.setenv("AIRFLOW_CONN_NGC_DEFAULT", json.dumps({"conn_type": "generic", "password": NGC_KEY}))
    aws_connection.client.put_object(Bucket=aws_connection.bucket, Key="in/a.txt", Body=b"a")
    for path, content in synthetic_vcn_files(samples=8).items():
        aws_connection.client.put_object(Bucket=aws_connection.bucket, Key=f"in/{path}", Body=content)
    dag_run = run_dag("mapped_on_another_connection", conf={"bucket": aws_connection.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    tis = dag_run.get_task_instances()
    maps = {(ti.task_id, ti.map_index) for ti in tis}
    for task_id in ("create", "ready", "run", "push", "train", "pull", "delete"):
        assert {(task_id, 0), (task_id, 1)} <= maps, task_id
    assert {("preflight", 0), ("janitor", 0)} <= maps
    assert sorted(call["argv"][1] for call in cli_calls(brev_sim, "create")) == ["mapped-a", "mapped-b"]
    for name in ("mapped-a", "mapped-b"):
        assert (brev_sim.sandbox(name) / "work.txt").read_text() == "mapped\n"
        assert (brev_sim.sandbox(name) / "data" / "a.txt").read_text() == "a"
    keys = {obj["Key"] for obj in aws_connection.client.list_objects_v2(Bucket=aws_connection.bucket)["Contents"]}
    assert {"out/a.txt"} <= keys
    wait_for_no_instances(brev_sim)


def test_preflight_and_tao_map_over_their_s3_and_ngc_connections(run_dag, brev_sim, aws_connection, monkeypatch):
    """Each mapped task renders and uses its own connection: ``aws_default`` points at nothing and there is no NGC
    key besides the mapped connections', so a task that used a default would fail."""
    moto = os.environ["AIRFLOW_CONN_AWS_DEFAULT"]
    for name in ("AWS_ALT_A", "AWS_ALT_B"):
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", moto)
    nowhere = json.loads(moto)
    nowhere["extra"] = {**nowhere["extra"], "endpoint_url": "http://127.0.0.1:9"}  # the discard port: refused
    monkeypatch.setenv("AIRFLOW_CONN_AWS_DEFAULT", json.dumps(nowhere))
    monkeypatch.delenv("AIRFLOW_CONN_NGC_DEFAULT", raising=False)
    monkeypatch.delenv("NGC_API_KEY", raising=False)
    for name, key in (("NGC_ALT_A", NGC_KEY), ("NGC_ALT_B", NGC_KEY[::-1])):
        monkeypatch.setenv(f"AIRFLOW_CONN_{name}", json.dumps({"conn_type": "generic", "password": key}))
    for path, content in synthetic_vcn_files(samples=8).items():
        aws_connection.client.put_object(Bucket=aws_connection.bucket, Key=f"in/{path}", Body=content)
    dag_run = run_dag("mapped_over_other_connections", conf={"bucket": aws_connection.bucket})
    assert run_state(dag_run) == "success", task_states(dag_run)
    maps = {(ti.task_id, ti.map_index) for ti in dag_run.get_task_instances()}
    assert {("preflight", i) for i in range(4)} | {("train", 0), ("train", 1)} <= maps
    create = next(ti for ti in dag_run.get_task_instances() if ti.task_id == "create")
    sandbox = brev_sim.sandbox(create.xcom_pull(task_ids="create"))
    for results in ("tao-results-0", "tao-results-1"):  # each training ran, in its own results directory
        assert list((sandbox / results).rglob("status.json")), results
    wait_for_no_instances(brev_sim)

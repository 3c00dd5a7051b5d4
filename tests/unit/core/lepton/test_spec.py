"""Unit tests of ``airflow_provider_brev/core/lepton/spec.py``."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from airflow_provider_brev.core.lepton import spec
from airflow_provider_brev.exceptions import BrevInvalidInputError


# -- spec: a Lepton step's platform parameters and the job body ---------------------------------------------------
@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        *[(name, "low-1000") for name in ("low", "l", "1", "LOW", " low ", 1, "low-1000")],
        ("2", "low-2000"),
        ("3", "low-3000"),
        *[(name, "mid-4000") for name in ("mid", "m", "medium", "4", 4, "mid-4000")],
        ("5", "mid-5000"),
        ("6", "mid-6000"),
        *[(name, "high-7000") for name in ("high", "h", "7", "High", "high-7000")],
        ("8", "high-8000"),
        ("9", "high-9000"),
        ("low-2000", "low-2000"),
        ("low-3000", "low-3000"),
        ("mid-5000", "mid-5000"),
        ("mid-6000", "mid-6000"),
        ("high-8000", "high-8000"),
        ("high-9000", "high-9000"),
        (None, None),
        ("", None),
    ],
)
def test_priorities_become_lepton_classes(given, canonical):
    assert spec.priority_class(given) == canonical


@pytest.mark.parametrize("given", ["0", "10", "urgent", "mid-4001", "hi", "low-4000", "mediums"])
def test_other_priorities_are_refused(given):
    with pytest.raises(BrevInvalidInputError, match="priority must be low, mid, high, a number 1-9"):
        spec.priority_class(given)


BASE = {"lepton_conn_id": "lep", "resource_shape": "cpu.small"}


def test_the_defaults_of_a_lepton_job():
    job = spec.lepton_job_spec(BASE)
    assert job == spec.LeptonJobSpec("lep", "cpu.small", queue_timeout=None)  # the operator passes its default
    assert (job.max_failure_retry, job.ttl_seconds_after_finished, job.shared_memory_size) == (0, 600, None)
    assert spec.LeptonJobSpec("lep", "cpu.small").queue_timeout == 3600.0  # an hour in the queue by default
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.priority = "x"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("params", "field", "value"),
    [
        ({"lepton_conn_id": "other"}, "lepton_conn_id", "other"),
        ({"resource_shape": "gpu.8xh100-sxm"}, "resource_shape", "gpu.8xh100-sxm"),
        ({"node_groups": "g1"}, "node_groups", ("g1",)),
        ({"node_groups": ["g1", "g.2_x-y"]}, "node_groups", ("g1", "g.2_x-y")),
        ({"node_groups": ("g1",)}, "node_groups", ("g1",)),
        ({"node_groups": None}, "node_groups", ()),
        ({"node_groups": "g1", "priority": "high"}, "priority", "high-7000"),
        ({"node_groups": "g1", "can_preempt": True}, "can_preempt", True),
        ({"node_groups": "g1", "can_preempt": False}, "can_preempt", False),
        ({"node_groups": "g1", "can_be_preempted": True}, "can_be_preempted", True),
        ({"node_groups": "g1", "can_be_preempted": False}, "can_be_preempted", False),
        ({"image_pull_secrets": "ngc"}, "image_pull_secrets", ("ngc",)),
        ({"image_pull_secrets": ["ngc", "ghcr"]}, "image_pull_secrets", ("ngc", "ghcr")),
        ({"secret_refs": {"HF_TOKEN": "MY_HF"}}, "secret_refs", {"HF_TOKEN": "MY_HF"}),
        ({"max_failure_retry": 0}, "max_failure_retry", 0),
        ({"max_failure_retry": None}, "max_failure_retry", 0),
        ({"max_failure_retry": 100}, "max_failure_retry", 100),
        ({"ttl_seconds_after_finished": 0}, "ttl_seconds_after_finished", 0),
        ({"ttl_seconds_after_finished": "None"}, "ttl_seconds_after_finished", 600),
        ({"ttl_seconds_after_finished": 7200}, "ttl_seconds_after_finished", 7200),
        ({"queue_timeout": 90}, "queue_timeout", 90.0),
        ({"queue_timeout": timedelta(minutes=2)}, "queue_timeout", 120.0),
        ({"shared_memory_size": 1}, "shared_memory_size", 1),
        ({"shared_memory_size": "1024"}, "shared_memory_size", 1024),
        ({"shared_memory_size": ""}, "shared_memory_size", None),
    ],
)
def test_each_platform_parameter_is_read(params, field, value):
    assert getattr(spec.lepton_job_spec({**BASE, **params}), field) == value


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"resource_shape": "H100"}, "resource_shape must be a Lepton resource shape such as 'gpu.8xh100-sxm'"),
        ({"resource_shape": "gpu"}, "resource_shape must be a Lepton resource shape"),
        ({"resource_shape": "gpu.8xh100-sxm "}, "resource_shape must be a Lepton resource shape"),
        ({"resource_shape": "gpu._x"}, "resource_shape must be a Lepton resource shape"),
        ({"resource_shape": None}, "^resource_shape must be a non-empty string"),
        ({"node_groups": "bad name"}, "node_groups must be names of letters, digits, '.', '_' and '-', got 'bad name'"),
        ({"node_groups": ["ok", 3]}, "node_groups must be names of letters, digits, '.', '_' and '-', got 3"),
        ({"node_groups": ["-x"]}, "node_groups must be names of letters"),
        ({"node_groups": ["x" * 129]}, "node_groups must be names of letters"),
        ({"node_groups": {"a": 1}}, "node_groups must be a name or a list of names"),
        ({"image_pull_secrets": ["ngc", "a/b"]}, "image_pull_secrets must be names of letters"),
        ({"priority": "high"}, "apply to dedicated node groups: pass node_groups too"),
        ({"can_preempt": False}, "apply to dedicated node groups"),
        ({"can_be_preempted": False}, "apply to dedicated node groups"),
        ({"node_groups": "g", "can_preempt": "maybe"}, "^can_preempt must be"),
        ({"node_groups": "g", "can_be_preempted": "maybe"}, "^can_be_preempted must be"),
        ({"secret_refs": {"A": "bad name"}}, "^secret_refs\\['A'\\] must be the name of a workspace secret"),
        ({"secret_refs": ["A"]}, "^secret_refs must be"),
        ({"max_failure_retry": -1}, "max_failure_retry must be a whole number >= 0 and <= 100"),
        ({"max_failure_retry": 101}, "max_failure_retry must be a whole number >= 0 and <= 100"),
        ({"ttl_seconds_after_finished": -1}, "ttl_seconds_after_finished must be a whole number >= 0"),
        ({"queue_timeout": "soon"}, "^queue_timeout must be"),
        ({"shared_memory_size": 0}, "shared_memory_size must be a whole number >= 1"),
        ({"lepton_conn_id": ""}, "^lepton_conn_id must be"),
    ],
)
def test_bad_platform_parameters_are_refused_by_name(params, message):
    with pytest.raises(BrevInvalidInputError, match=message):
        spec.lepton_job_spec({**BASE, **params})


def test_the_job_body_of_every_setting():
    job = spec.lepton_job_spec(
        {
            **BASE,
            "resource_shape": "gpu.8xh100-sxm",
            "node_groups": "g1",
            "priority": "mid",
            "can_preempt": True,
            "can_be_preempted": False,
            "image_pull_secrets": "ngc",
            "secret_refs": {"B_REF": "SB", "A_REF": "SA"},
            "shared_memory_size": 1024,
            "ttl_seconds_after_finished": 0,
            "max_failure_retry": 2,
        }
    )
    body = job.body(
        name="af-x-t1",
        image="nvcr.io/x:1",
        command=["bash", "-c", "x"],
        env={"Z": "1", "A": "2"},
        secret_env_refs={"PLAN": "SP", "A_REF": "OVERRIDE"},
        labels={"airflow-dag": "d"},
    )
    assert body == {
        "metadata": {"id": "af-x-t1", "name": "af-x-t1", "labels": {"airflow-dag": "d"}},
        "spec": {
            "resource_shape": "gpu.8xh100-sxm",
            "container": {"image": "nvcr.io/x:1", "command": ["bash", "-c", "x"]},
            "completions": 1,
            "parallelism": 1,
            "max_failure_retry": 2,
            "envs": [
                {"name": "A", "value": "2"},
                {"name": "Z", "value": "1"},
                {"name": "A_REF", "value_from": {"secret_name_ref": "OVERRIDE"}},
                {"name": "B_REF", "value_from": {"secret_name_ref": "SB"}},
                {"name": "PLAN", "value_from": {"secret_name_ref": "SP"}},
            ],
            "image_pull_secrets": ["ngc"],
            "ttl_seconds_after_finished": 0,
            "shared_memory_size": 1024,
            "affinity": {"allowed_dedicated_node_groups": ["g1"]},
            "queue_config": {"priority_class": "mid-4000", "can_preempt": True, "can_be_preempted": False},
        },
    }


def test_the_job_body_of_the_defaults():
    body = spec.lepton_job_spec(BASE).body(name="n", image="i", command=["c"])
    assert body == {
        "metadata": {"id": "n", "name": "n", "labels": {}},
        "spec": {
            "resource_shape": "cpu.small",
            "container": {"image": "i", "command": ["c"]},
            "completions": 1,
            "parallelism": 1,
            "max_failure_retry": 0,
            "envs": [],
            "image_pull_secrets": [],
            "ttl_seconds_after_finished": 600,
        },
    }


def test_the_job_body_references_secrets_by_name_only():
    job = spec.lepton_job_spec(
        {
            "lepton_conn_id": "lepton_default",
            "resource_shape": "gpu.8xh100-sxm",
            "node_groups": ["h100-pool"],
            "priority": "high",
            "image_pull_secrets": "ngc",
            "secret_refs": {"HF_TOKEN": "MY_HF_TOKEN"},
            "queue_timeout": 60,
        }
    )
    body = job.body(
        name="af-x-t1", image="nvcr.io/x:1", command=["bash"], secret_env_refs={"PLAN": "S1"}, env={"A": "b"}
    )
    assert body["metadata"]["id"] == "af-x-t1"
    assert body["spec"]["affinity"] == {"allowed_dedicated_node_groups": ["h100-pool"]}
    assert body["spec"]["queue_config"] == {"priority_class": "high-7000"}
    assert body["spec"]["image_pull_secrets"] == ["ngc"]
    assert body["spec"]["envs"] == [
        {"name": "A", "value": "b"},
        {"name": "HF_TOKEN", "value_from": {"secret_name_ref": "MY_HF_TOKEN"}},
        {"name": "PLAN", "value_from": {"secret_name_ref": "S1"}},
    ]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"resource_shape": "H100"}, "resource_shape"),
        ({"resource_shape": "cpu.small", "priority": "urgent"}, "priority"),
        ({"resource_shape": "cpu.small", "priority": "high"}, "node_groups"),
        ({"resource_shape": "cpu.small", "max_failure_retry": -1}, "max_failure_retry"),
        ({"resource_shape": "cpu.small", "secret_refs": {"A": "bad name"}}, "secret_refs"),
    ],
)
def test_bad_platform_parameters_are_refused_by_name_in_a_bare_spec(params, words):
    with pytest.raises(BrevInvalidInputError, match=words):
        spec.lepton_job_spec({"lepton_conn_id": "lepton_default", **params})

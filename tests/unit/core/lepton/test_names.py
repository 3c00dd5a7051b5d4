"""The pure rules of Lepton steps, one row per case (airflow_provider_brev/core/lepton/): what every job state of
the leptonai API means, what every API answer means, the names of a task's jobs and secrets, the container's command
and plan, a TAO action's command and the agent's result line. Each rule has a row that meets it and a near miss."""

from __future__ import annotations

import dataclasses
import functools
import random
import string
from datetime import timedelta

import pytest

from airflow_provider_brev.core.jobs.attempts import COLLECT, IGNORE, REATTACH, RELAUNCH, SUPERSEDED
from airflow_provider_brev.core.lepton import agent, names, report, spec, states, tao
from airflow_provider_brev.core.lepton.errors import MAX_QUOTED, api_error, quote
from airflow_provider_brev.core.lepton.states import QUEUED
from airflow_provider_brev.exceptions import (
    BrevInvalidInputError,
    LeptonAuthError,
    LeptonJobExistsError,
    LeptonNotFoundError,
    LeptonRejectedError,
    LeptonResourcesUnavailableError,
    LeptonTransientError,
)

IDS = {"dag_id": "d", "task_id": "t", "run_id": "manual__x"}


# -- states: every state of leptonai's LeptonJobState ------------------------------------------------------------
@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("Queueing", "queued"),
        ("Awaiting", "queued"),
        ("PendingRetry", "starting"),
        ("Starting", "starting"),
        ("Restarting", "starting"),
        ("Running", "running"),
        ("Completed", "succeeded"),
        ("Failed", "failed"),
        ("Stopped", "stopped"),
        ("Stopping", "stopped"),
        ("Deleting", "stopped"),
        ("Deleted", "stopped"),
        ("Terminating", "stopped"),
        ("Unknown", "unknown"),  # the SDK's own "Unknown": followed like a running job
        ("completed", "unknown"),  # near miss: states are case-sensitive
        ("Brand-New", "unknown"),
        ("", "starting"),  # no state yet: just submitted
    ],
)
def test_every_job_state_has_its_phase(state, phase):
    """The phase words are also what a trigger event and XCom carry (LeptonOutcome.to_dict)."""
    assert states.job_phase({"status": {"state": state}}) == phase


@pytest.mark.parametrize(
    ("job", "phase"),
    [
        (None, "missing"),
        ({}, "starting"),
        ({"status": None}, "starting"),
        ({"status": {}}, "starting"),
        ({"status": {"state": None}}, "starting"),
        ({"status": {"state": "Archived", "succeeded": 1}}, "succeeded"),  # completions default to 1
        ({"status": {"state": "Archived", "succeeded": 0}}, "failed"),
        ({"status": {"state": "Archived"}}, "failed"),  # no succeeded count: none succeeded
        ({"status": {"state": "Archived", "succeeded": None}, "spec": None}, "failed"),
        ({"status": {"state": "Archived", "succeeded": 1}, "spec": {"completions": None}}, "succeeded"),
        ({"status": {"state": "Archived", "succeeded": 1}, "spec": {"completions": 2}}, "failed"),
        ({"status": {"state": "Archived", "succeeded": 2}, "spec": {"completions": 2}}, "succeeded"),
        ({"status": {"state": "Archived", "succeeded": 3}, "spec": {"completions": 2}}, "succeeded"),
        ({"status": {"state": "archived", "succeeded": 1}}, "unknown"),  # near miss
    ],
)
def test_absent_and_archived_jobs(job, phase):
    assert states.job_phase(job) == phase


@pytest.mark.parametrize(
    ("phase", "collectable", "verdict"),
    [
        (QUEUED, True, REATTACH),
        (states.STARTING, True, REATTACH),
        (states.RUNNING, True, REATTACH),
        (states.UNKNOWN, True, REATTACH),
        (states.RUNNING, False, REATTACH),  # alive: never a second job, whatever its generation
        (states.SUCCEEDED, True, COLLECT),
        (states.SUCCEEDED, False, SUPERSEDED),
        (states.FAILED, True, RELAUNCH),
        (states.STOPPED, True, RELAUNCH),
        (states.MISSING, True, IGNORE),
    ],
)
def test_what_a_try_does_about_an_earlier_job(phase, collectable, verdict):
    assert states.earlier_job_verdict(phase, collectable=collectable) == verdict


def test_an_earlier_success_is_collected_by_default():
    assert states.earlier_job_verdict(states.SUCCEEDED) == COLLECT


@pytest.mark.parametrize(
    ("phase", "ended", "alive"),
    [
        (states.QUEUED, False, True),
        (states.STARTING, False, True),
        (states.RUNNING, False, True),
        (states.UNKNOWN, False, True),
        (states.SUCCEEDED, True, False),
        (states.FAILED, True, False),
        (states.STOPPED, True, False),
        (states.MISSING, True, False),
    ],
)
def test_a_phase_is_either_ended_or_alive(phase, ended, alive):
    assert (phase in states.ENDED, phase in states.ALIVE) == (ended, alive)


# -- errors: what an answer of the API means ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "body", "error", "message"),
    [
        (401, "", LeptonAuthError, "(create job j, 401)"),
        (402, "", LeptonRejectedError, "Lepton refused the request (create job j, 402)."),  # near miss of 401
        (403, "", LeptonAuthError, "may not do this (create job j, 403)"),
        (404, "", LeptonNotFoundError, "Not found in Lepton workspace 'ws' (create job j)."),
        (405, "", LeptonRejectedError, "Lepton refused the request (create job j, 405)."),
        (409, "", LeptonJobExistsError, "Lepton says it exists already (create job j)."),
        (410, "", LeptonRejectedError, "Lepton refused the request (create job j, 410)."),
        (429, "", LeptonTransientError, "failed (create job j, 429)."),
        (430, "", LeptonRejectedError, "Lepton refused the request (create job j, 430)."),
        (428, "", LeptonRejectedError, "Lepton refused the request (create job j, 428)."),
        (499, "", LeptonRejectedError, "Lepton refused the request (create job j, 499)."),
        (500, "", LeptonTransientError, "failed (create job j, 500)."),
        (501, "", LeptonTransientError, "failed (create job j, 501)."),
        (503, "", LeptonTransientError, "failed (create job j, 503)."),
        (400, "", LeptonRejectedError, "Lepton refused the request (create job j, 400)."),
    ],
)
def test_every_status_has_its_typed_error(status, body, error, message):
    err = api_error(status, body, what="create job j", workspace="ws")
    assert type(err) is error
    assert message in str(err) and "Lepton said" not in str(err) and "XX" not in str(err)


@pytest.mark.parametrize(
    ("body", "no_resources"),
    [
        ("workspace quota exceeded", True),
        ("Quota: 0 left", True),
        ("insufficient gpu.8xh100-sxm", True),
        ("not enough nodes", True),
        ("request exceeds the limit", True),
        ("exceeded capacity", True),
        ("exceed limit", True),
        ("no available node", True),
        ("no free gpu", True),
        ("no available resource in the group", True),
        ("resources unavailable", True),
        ("resource is unavailable", True),
        ("resources are unavailable", True),
        ("", False),
        ("unknown resource shape", False),  # near misses: the words without the phrase
        ("enough", False),
        ("limit reached", False),
        ("no gpu", False),
        ("available nodes: 0", False),
        ("unavailable", False),
    ],
)
def test_a_refusal_for_want_of_resources_is_told_by_its_phrase(body, no_resources):
    err = api_error(400, body, what="create job j", workspace="ws")
    assert type(err) is (LeptonResourcesUnavailableError if no_resources else LeptonRejectedError)


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (403, LeptonResourcesUnavailableError),  # the phrase comes before "forbidden"
        (404, LeptonResourcesUnavailableError),
        (409, LeptonJobExistsError),  # the status comes first
        (429, LeptonTransientError),
        (503, LeptonTransientError),
        (401, LeptonAuthError),
    ],
)
def test_the_quota_phrase_under_other_statuses(status, error):
    assert type(api_error(status, "quota exceeded", what="w", workspace="ws")) is error


def test_no_answer_is_transient_and_says_why():
    err = api_error(None, "ConnectionResetError", what="get job j", workspace="ws")
    assert type(err) is LeptonTransientError
    assert str(err) == "Could not reach the Lepton API of workspace 'ws' (get job j): ConnectionResetError"


@pytest.mark.parametrize(
    ("body", "quotable", "said"),
    [
        ("bad  shape\n  gpu.x", True, " Lepton said: bad shape gpu.x"),  # on one line
        ("bad shape", False, ""),  # a call that carried a secret value: never quoted
        ("", True, ""),
        (None, True, ""),
    ],
)
def test_the_body_is_quoted_only_when_the_call_may_quote_it(body, quotable, said):
    err = api_error(400, body, what="create secret S", workspace="ws", quotable=quotable)  # type: ignore[arg-type]
    assert str(err) == f"Lepton refused the request (create secret S, 400).{said}"


def test_the_body_is_quoted_by_default():
    assert str(api_error(404, "no job j", what="get job j", workspace="ws")).endswith(" Lepton said: no job j")


@pytest.mark.parametrize(
    ("body", "quoted"),
    [
        ("x" * MAX_QUOTED, "x" * MAX_QUOTED),
        ("x" * (MAX_QUOTED + 1), "x" * (MAX_QUOTED - 3) + "..."),
        (" a\n\tb ", "a b"),
        ("", ""),
    ],
)
def test_a_quote_is_one_line_of_at_most_max_quoted(body, quoted):
    assert quote(body) == quoted


def test_max_quoted_is_300():
    assert MAX_QUOTED == 300  # the messages' documented limit (core/lepton/errors.py)


# -- names: one job and one secret per try -----------------------------------------------------------------------
def test_a_task_key_is_stable_across_releases():
    """A retry after an upgrade finds the earlier try's job by this name: the key never changes."""
    assert names.task_key(**IDS) == "863c2170134f4797b07d"
    assert names.task_key(**IDS, map_index=-1) == "863c2170134f4797b07d"
    assert names.task_key(**IDS, map_index=3) == "af01dc1f53fa3bd4476d"


@pytest.mark.parametrize(
    ("try_number", "name"),
    [
        (1, "af-863c2170134f4797b07d-t1"),
        ("2", "af-863c2170134f4797b07d-t2"),
        (10**10, "af-863c2170134f4797b07d-t10000000000"),  # 36 characters: the longest Lepton accepts
    ],
)
def test_job_names(try_number, name):
    assert names.job_name(**IDS, try_number=try_number) == name
    assert names.job_name(**IDS, try_number=try_number, map_index=-1) == name


@pytest.mark.parametrize(("try_number", "words"), [(0, "at least 1"), (-1, "at least 1"), (10**11, "too large")])
def test_impossible_job_names_are_refused(try_number, words):
    with pytest.raises(ValueError, match=words):
        names.job_name(**IDS, try_number=try_number)


def test_the_longest_job_name_is_36():
    assert names.MAX_JOB_NAME_LENGTH == 36  # the SDK's validate_job_name


@pytest.mark.parametrize(
    ("try_number", "first_try", "earlier"),
    [
        (1, 1, []),
        (2, 1, [(1, True)]),
        (3, 2, [(2, True), (1, False)]),
        (4, 4, [(3, False), (2, False), (1, False)]),
        (3, 1, [(2, True), (1, True)]),
    ],
)
def test_earlier_jobs_newest_first_with_their_generation(try_number, first_try, earlier):
    jobs = names.earlier_jobs(**IDS, try_number=try_number, first_try=first_try)
    assert [(job.try_number, job.collectable) for job in jobs] == earlier
    assert [job.name for job in jobs] == [names.job_name(**IDS, try_number=n, map_index=-1) for n, _ in earlier]


def test_earlier_jobs_of_a_mapped_task_are_its_own():
    [job] = names.earlier_jobs(**IDS, try_number=2, first_try=1, map_index=3)
    assert job.name == "af-af01dc1f53fa3bd4476d-t1"


def test_a_try_job_is_a_frozen_value():
    job = names.TryJob("af-x-t1", 1, collectable=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("job", "secret"),
    [
        ("af-863c2170134f4797b07d-t1", "AIRFLOW_LEPTON_863C2170134F4797B07D_T1"),
        ("af-ab-t12", "AIRFLOW_LEPTON_AB_T12"),
    ],
)
def test_a_jobs_secret_name(job, secret):
    assert names.secret_name(job) == secret


# -- agent: the container's command and its plan -----------------------------------------------------------------
def test_the_container_command_enters_the_workdir_and_runs_the_agent():
    assert agent.job_command() == [
        "bash",
        "-c",
        'mkdir -p /workspace && cd /workspace && exec python3 -c "$AIRFLOW_LEPTON_AGENT"',
    ]


def test_the_agent_reads_the_plan_and_state_dir_the_step_names():
    source = agent.agent_source()
    assert f'PLAN_ENV = "{agent.PLAN_ENV}"' in source and f'STATE_DIR = "{agent.STATE_DIR}"' in source
    assert (agent.PLAN_ENV, agent.STATE_DIR) == ("AIRFLOW_LEPTON_PLAN", ".airflow-lepton")
    assert source.startswith('"""') and "def main" in source


@pytest.mark.parametrize(
    ("path", "seen"),
    [
        ("data", "/workspace/data"),
        ("results/train/", "/workspace/results/train"),
        ("/mnt/results", "/mnt/results"),  # an absolute path stays
    ],
)
def test_container_paths(path, seen):
    assert agent.container_path(path) == seen


@pytest.mark.parametrize(
    ("value", "directory"),
    [
        ("data", "data"),
        ("results/train/", "results/train"),
        ("./a//b/.", "a/b"),
        ("a\\b", "a/b"),
        (" data ", "data"),
        ("a..b", "a..b"),  # near miss of '..': a name with dots
        (".", ""),  # the working directory itself
    ],
)
def test_job_directories(value, directory):
    assert agent.job_directory("inputs", value) == directory


@pytest.mark.parametrize("value", ["", None, "   ", "/etc", "~/data", "../up", "a/../../b", "a\x00b", "a\nb", "a\rb"])
def test_job_directories_outside_the_workdir_are_refused(value):
    with pytest.raises(BrevInvalidInputError, match="inputs directory .* relative path below"):
        agent.job_directory("inputs", value)


@functools.cache
def _noise() -> str:
    """1.5 million random letters and digits: text zlib hardly compresses (made once, when first needed)."""
    return "".join(random.Random(7).choices(string.ascii_letters + string.digits, k=1_500_000))


def _plan_of_size(chars: int) -> dict[str, object]:
    return {"inputs": [{"url": _noise()[:chars], "path": "p", "size": 1}]}


def _encoded_length(chars: int) -> int:
    try:
        return len(agent.encode_plan(_plan_of_size(chars)))
    except BrevInvalidInputError as err:
        return int(str(err).split(" is ")[1].split(" bytes")[0])


def _size_for(length: int) -> int:
    """The smallest plan size whose encoding is exactly ``length`` bytes (a multiple of 4: base64): a secant step
    onto it (the length grows about linearly with the size), then one character at a time."""
    chars = length
    for _ in range(8):
        got = _encoded_length(chars)
        if abs(got - length) <= 16:
            break
        chars = chars * length // got
    while _encoded_length(chars) < length:
        chars += 1
    while _encoded_length(chars - 1) >= length:
        chars -= 1
    assert _encoded_length(chars) == length
    return chars


def test_a_plan_of_up_to_one_mebibyte_is_encoded_and_decoded():
    plan = {"inputs": [{"url": "https://x/y?sig=1", "path": "a/b", "size": 3}], "outputs": [], "env": {"A": "b"}}
    encoded = agent.encode_plan(plan)
    assert agent.decode_plan(encoded) == plan and "sig" not in encoded
    limit = 1024 * 1024  # what a Lepton workspace secret holds
    exact = _size_for(limit)
    assert len(agent.encode_plan(_plan_of_size(exact))) == limit  # exactly the limit: fits
    larger = _size_for(limit + 4)  # the next longer encoding
    with pytest.raises(BrevInvalidInputError, match=r"\(1 input objects\) is 1048580 bytes, more than a Lepton secret"):
        agent.encode_plan(_plan_of_size(larger))


# -- tao: one TAO action as the job's command --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "command"),
    [
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": 2, "overrides": {"train.epochs": 3}},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "train.epochs=3 train.num_gpus=2",
        ),
        (
            {"task": "visual_changenet", "action": "train"},  # all GPUs: no override
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results",
        ),
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": "all"},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results",
        ),
        (
            {"task": "visual_changenet", "action": "train", "num_gpus": 2, "overrides": {"train.num_gpus": 1}},
            "mkdir -p /workspace/results/train && touch /workspace/results/train/.brev-tao-started && "
            "visual_changenet train -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "train.num_gpus=1",  # the user's own override stands
        ),
        (
            {"task": "gap_analysis", "action": "vcn_aoi", "num_gpus": 2},  # its results below the action, no GPUs
            "mkdir -p /workspace/results/vcn_aoi && touch /workspace/results/vcn_aoi/.brev-tao-started && "
            "gap_analysis vcn_aoi -e /workspace/results/specs/s.yaml results_dir=/workspace/results/vcn_aoi",
        ),
        (
            {"task": "gap_analysiss", "action": "vcn_aoi", "num_gpus": 2},  # near miss of gap_analysis
            "mkdir -p /workspace/results/vcn_aoi && touch /workspace/results/vcn_aoi/.brev-tao-started && "
            "gap_analysiss vcn_aoi -e /workspace/results/specs/s.yaml results_dir=/workspace/results "
            "vcn_aoi.num_gpus=2",
        ),
    ],
)
def test_tao_job_commands(kwargs, command):
    assert tao.tao_job_command(spec_file="s.yaml", results_dir="results", **kwargs) == command


@pytest.mark.parametrize(
    ("task", "action", "words"),
    [
        ("Train", "train", "Invalid TAO task 'Train'"),
        ("1task", "train", "Invalid TAO task '1task'"),
        ("", "train", "Invalid TAO task ''"),
        (None, "train", "Invalid TAO task None"),
        ("visual_changenet", "train; rm", "Invalid TAO action 'train; rm'"),
        ("visual_changenet", "", "Invalid TAO action ''"),
    ],
)
def test_tao_tasks_and_actions_are_words(task, action, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        tao.tao_job_command(task=task, action=action, spec_file="s.yaml", results_dir="results")


# -- report: the agent's result line -----------------------------------------------------------------------------
FULL = report.JobReport(exit_code=2, downloaded=4, uploaded=3, upload_failures=["a.txt"], report=["BREV_TAO_END"])


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (report.render_result(FULL), FULL),
        (report.render_result(FULL) + "\n", FULL),
        (report.render_result(report.JobReport(exit_code=0)), report.JobReport(exit_code=0)),
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAxfQ==", report.JobReport(exit_code=1)),  # {"exit_code": 1}
        ("AIRFLOW_LEPTON_RESULTeyJleGl0X2NvZGUiOiAxfQ==", None),  # near miss: the marker ends with a space
        (" AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAxfQ==", None),  # near miss: not at the line's start
        ("AIRFLOW_LEPTON_RESULT !!", None),  # not base64
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2Nv!ZGUiOiAxfQ==", None),  # damaged: base64 with a foreign character
        ("AIRFLOW_LEPTON_RESULT e30=", None),  # {}: no exit code
        ("AIRFLOW_LEPTON_RESULT WzFd", None),  # [1]: not an object
        ("AIRFLOW_LEPTON_RESULT bnVsbA==", None),  # null
        ("AIRFLOW_LEPTON_RESULT eyJleGl0X2NvZGUiOiAieCJ9", None),  # {"exit_code": "x"}
        ("AIRFLOW_LEPTON_RESULT //79", None),  # not UTF-8 JSON
        ("[airflow-lepton] downloaded 3 inputs", None),
    ],
)
def test_result_lines(line, parsed):
    assert report.parse_result(line) == parsed


def test_a_report_round_trips_through_a_trigger_event():
    assert report.report_from_dict(FULL.to_dict()) == FULL
    assert FULL.to_dict() == {
        "exit_code": 2,
        "downloaded": 4,
        "uploaded": 3,
        "upload_failures": ["a.txt"],
        "report": ["BREV_TAO_END"],
    }
    assert report.report_from_dict({"exit_code": "5"}) == report.JobReport(exit_code=5)
    assert report.report_from_dict({"downloaded": 1}) is None
    assert report.report_from_dict(None) is None
    assert report.report_from_dict([("exit_code", 1)]) is None  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        FULL.exit_code = 0  # type: ignore[misc]


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

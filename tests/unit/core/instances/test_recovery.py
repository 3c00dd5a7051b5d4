"""Durable steps, pure decisions: is the instance lost, recover or give up, how many recoveries were used, and the
shape checks of a step's data parameters. End-to-end behaviour: tests/integration/test_durable_steps.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.instances.recovery import (
    GIVE_UP,
    LOST_FAILURE,
    LOST_MISSING,
    LOST_UNREACHABLE,
    RECOVER,
    decide_recovery,
    diagnose_loss,
    may_be_lost,
    needs_probe,
    recoveries_used,
    validate_budget,
)
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLIError,
    BrevCommandError,
    BrevConnectionLostError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevJobLostError,
    BrevTimeoutError,
    BrevTransferConflictError,
    BrevTransferError,
    TaoProgramFaultError,
    TaoVerificationError,
)
from airflow_provider_brev.staging.step_data import sync_seconds

NAME = "afbrev-x"
LOST_AT = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)


def inst(status: str = "RUNNING", build: str = "COMPLETED") -> BrevInstance:
    return BrevInstance(name=NAME, id="i-1", status=status, build_status=build)


@pytest.mark.parametrize(
    ("error", "suspect"),
    [
        (BrevInstanceNotFoundError("could not look up instance"), True),
        (BrevInstanceNotReadyError('is in state "FAILURE"'), True),
        (BrevConnectionLostError("ssh dropped"), True),
        (BrevJobLostError("job vanished"), True),
        (BrevTransferError("3 files failed"), True),
        (BrevCLIError("exit 1"), True),
        (BrevCommandError("exit 3", exit_code=3), False),  # the command's own failure
        (TaoProgramFaultError("oom", exit_code=1), False),
        (TaoVerificationError("silent pass"), False),
        (BrevTransferConflictError("different objects"), False),  # no retry can fix it
        (BrevInvalidInputError("bad"), False),
        (BrevTimeoutError("deadline"), False),
        (BrevAuthError("logged out"), False),
        (ValueError("not ours"), False),
    ],
)
def test_which_errors_may_mean_a_lost_instance(error, suspect):
    assert may_be_lost(error) is suspect


@pytest.mark.parametrize(
    ("error", "instance", "reachable", "verdict"),
    [
        (BrevInstanceNotFoundError("x"), None, None, LOST_MISSING),
        (BrevInstanceNotFoundError("x"), inst("DELETING"), None, LOST_MISSING),
        (BrevInstanceNotReadyError("x"), inst("FAILURE"), None, LOST_FAILURE),
        (BrevConnectionLostError("x"), inst("RUNNING", "CREATE_FAILED"), None, LOST_FAILURE),
        (BrevConnectionLostError("x"), inst("RUNNING"), False, LOST_UNREACHABLE),
        (BrevConnectionLostError("x"), inst("RUNNING"), True, None),  # a blip: it answers again
        (BrevConnectionLostError("x"), inst("RUNNING"), None, None),  # not probed: not lost
        (BrevJobLostError("x"), inst("RUNNING"), False, None),  # the job died, the instance is there
        (BrevTransferError("x"), inst("RUNNING"), None, None),
        (BrevInstanceNotReadyError("x"), inst("DEPLOYING", "PENDING"), None, None),  # still booting
        (BrevCommandError("x", exit_code=1), None, None, None),  # never, whatever the listing says
    ],
)
def test_diagnose_loss(error, instance, reachable, verdict):
    assert diagnose_loss(error, instance, reachable=reachable) == verdict


@pytest.mark.parametrize(
    ("error", "instance", "probe"),
    [
        (BrevConnectionLostError("x"), inst("RUNNING"), True),
        (BrevConnectionLostError("x"), None, False),
        (BrevConnectionLostError("x"), inst("FAILURE"), False),
        (BrevJobLostError("x"), inst("RUNNING"), False),
        (BrevInstanceNotFoundError("x"), inst("RUNNING"), False),
    ],
)
def test_a_probe_is_needed_only_for_a_running_instance_after_a_transient_error(error, instance, probe):
    assert needs_probe(error, instance) is probe


def decide(**overrides):
    args = {
        "name": NAME,
        "loss": LOST_MISSING,
        "owned": True,
        "ephemeral": False,
        "used": 0,
        "budget": 2,
        "lost_at": LOST_AT,
    }
    return decide_recovery(**{**args, **overrides})


@pytest.mark.parametrize(
    ("overrides", "action", "number", "in_message"),
    [
        ({}, RECOVER, 1, f"instance {NAME} lost at 2026-03-01 12:30:05 UTC; re-created, recovery 1/2"),
        ({"used": 1}, RECOVER, 2, "recovery 2/2"),
        ({"used": 2}, GIVE_UP, 0, "max_instance_recoveries=2 already used"),
        ({"budget": 0}, GIVE_UP, 0, "max_instance_recoveries=0"),
        ({"owned": False}, GIVE_UP, 0, "adopted (adopt_existing=True)"),
        ({"owned": None}, GIVE_UP, 0, "pass create_task_id=<its task id>"),
        ({"owned": None, "create_task_id": "make"}, GIVE_UP, 0, "task 'make' has no XCom 'brev_instance'"),
        ({"owned": None, "ephemeral": True}, RECOVER, 1, "recovery 1/2"),  # its own request is the record
        ({"owned": None, "ephemeral": True, "used": 2}, GIVE_UP, 0, "already used"),
        ({"loss": LOST_FAILURE, "owned": False}, GIVE_UP, 0, "is in FAILURE"),
        ({"lost_at": LOST_AT.astimezone(UTC) + timedelta(hours=1)}, RECOVER, 1, "13:30:05 UTC"),
    ],
)
def test_recover_or_give_up(overrides, action, number, in_message):
    decision = decide(**overrides)
    assert (decision.action, decision.number) == (action, number)
    assert in_message in decision.message


@pytest.mark.parametrize(
    ("values", "used"),
    [
        ((), 0),
        ((None, None), 0),
        (({"count": 1, "instance": NAME}, None), 1),
        (({"count": 1}, {"count": 2}), 2),  # the larger: XCom may be ahead within a try, the store across tries
        (({"count": "2"}, {"count": True}, [3], {"count": -1}), 0),  # unreadable values count as nothing
    ],
)
def test_recoveries_used(values, used):
    assert recoveries_used(*values) == used


@pytest.mark.parametrize("value", [-1, 1.5, "2", True, None])
def test_bad_budgets_are_refused(value):
    with pytest.raises(BrevInvalidInputError, match="max_instance_recoveries"):
        validate_budget(value)


@pytest.mark.parametrize(("value", "seconds"), [(300, 300.0), (0.5, 0.5), (timedelta(minutes=2), 120.0)])
def test_sync_interval(value, seconds):
    assert sync_seconds(value) == seconds


@pytest.mark.parametrize("value", [0, -5, timedelta(0), "soon", None])
def test_bad_sync_intervals_are_refused(value):
    with pytest.raises(BrevInvalidInputError, match="output_sync_interval"):
        sync_seconds(value)

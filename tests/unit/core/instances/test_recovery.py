"""Durable steps, pure decisions: is the instance lost, recover or give up, how many recoveries were used, and the
shape checks of a step's data parameters. End-to-end behaviour: tests/integration/test_durable_steps.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.instances.recovery import (
    DEFAULT_MAX_INSTANCE_RECOVERIES,
    EVENT_INSTANCE_LOST,
    GIVE_UP,
    LOST_FAILURE,
    LOST_MISSING,
    LOST_UNREACHABLE,
    RECOVER,
    decide_recovery,
    describe_loss,
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
    BrevInstanceFailedError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevJobLostError,
    BrevTimeoutError,
    BrevTransferConflictError,
    BrevTransferError,
    BrevTransientError,
    TaoProgramFaultError,
    TaoVerificationError,
)

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


def test_recovery_constants_and_words():
    assert (DEFAULT_MAX_INSTANCE_RECOVERIES, EVENT_INSTANCE_LOST) == (2, "instance_lost")
    assert describe_loss(LOST_MISSING) == "is gone (deleted, not listed by brev ls)"
    assert describe_loss(LOST_FAILURE) == "is in FAILURE"
    assert describe_loss(LOST_UNREACHABLE) == "is RUNNING but unreachable past its failure budget"
    assert describe_loss("other") == "other"


def test_zero_recoveries_is_a_valid_budget_that_turns_recovery_off():
    assert validate_budget(0) == 0
    assert validate_budget(3) == 3
    decision = decide_recovery(
        name="w", loss=LOST_MISSING, owned=True, ephemeral=False, used=0, budget=0, lost_at=datetime.now(UTC)
    )
    assert decision.action == GIVE_UP


def test_no_record_names_any_upstream_task():
    decision = decide_recovery(
        name="w", loss=LOST_MISSING, owned=None, ephemeral=False, used=0, budget=2, lost_at=datetime.now(UTC)
    )
    assert "(any upstream task has no XCom 'brev_instance' for it)" in decision.message


def test_the_largest_count_wins_ties_included():
    assert recoveries_used({"count": 2}, {"count": 2}, {"count": 1}) == 2
    assert recoveries_used({"count": 0}) == 0


def test_a_probe_is_needed_only_after_a_transient_error_on_a_running_instance():
    running = BrevInstance("w", "i", "RUNNING")
    assert needs_probe(BrevTransientError("502"), running)
    assert not needs_probe(BrevInstanceFailedError("x"), running)
    assert not needs_probe(BrevJobLostError("x"), running)
    assert not needs_probe(BrevTimeoutError("x"), running)
    assert not may_be_lost(BrevTimeoutError("x"))
    assert may_be_lost(BrevInstanceFailedError("x"))

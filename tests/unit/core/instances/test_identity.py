"""An instance is known by its id, and an expired one is not brought back: the pure rules.

Subjects: :mod:`airflow_provider_brev.core.instances.identity`, the identity and expiry rules of
:mod:`airflow_provider_brev.core.instances.recovery`, and the rounding of the expiry a managed name carries
(:mod:`airflow_provider_brev.core.protocol.names`). End to end: tests/integration/test_instance_identity.py.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_brev.core.instances.identity import (
    GONE,
    REPLACED,
    SAME,
    UNRECORDED,
    InstanceRef,
    identity_verdict,
    replaced_message,
)
from airflow_provider_brev.core.instances.recovery import (
    GIVE_UP,
    LOST_MISSING,
    LOST_REPLACED,
    RECOVER,
    decide_recovery,
    diagnose_loss,
    needs_probe,
)
from airflow_provider_brev.core.protocol.output import BrevInstance
from airflow_provider_brev.exceptions import BrevConnectionLostError, BrevInstanceNotFoundError, BrevJobLostError

NAME = "shared-gpu"
LOST_AT = datetime(2026, 3, 1, 12, 30, 5, tzinfo=UTC)


def listed(instance_id: str, status: str = "RUNNING") -> BrevInstance:
    return BrevInstance(name=NAME, id=instance_id, status=status, build_status="COMPLETED")


@pytest.mark.parametrize(
    ("live", "known", "verdict"),
    [
        (listed("ours"), {"ours"}, SAME),
        (listed("ours"), {"older", "ours"}, SAME),  # a recovery recorded the new id beside the old one
        (listed("theirs"), {"ours"}, REPLACED),
        (listed("theirs", "DELETING"), {"ours"}, REPLACED),  # their instance, whatever its status
        (None, {"ours"}, GONE),
        (None, set(), GONE),
        (listed("any"), set(), UNRECORDED),  # no record: an instance the DAG did not create, known by name
        (listed("any"), {""}, UNRECORDED),  # an empty recorded id proves nothing
    ],
)
def test_identity_verdicts(live, known, verdict):
    assert identity_verdict(live, known) == verdict


def test_the_refusal_names_both_ids_and_what_was_not_done():
    message = replaced_message(NAME, listed("theirs"), {"ours"}, refused="deleted")
    assert "is now id theirs (RUNNING)" in message
    assert "(id ours)" in message
    assert "so it was not deleted" in message


@pytest.mark.parametrize(
    ("known", "named"),
    [({"b-2", "a-1", ""}, "(id a-1, b-2)"), ({""}, "(id none)"), (set(), "(id none)")],
)
def test_the_refusal_lists_the_recorded_ids_sorted_or_says_none(known, named):
    message = replaced_message(NAME, listed("theirs"), known, refused="used")
    assert f"not the instance this DAG run created under that name {named}: that one is gone" in message


def test_an_instance_ref_is_a_value_without_an_id_by_default():
    ref = InstanceRef("gpu-1")
    assert ref.id == "" and ref == InstanceRef("gpu-1", "")
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.id = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("error", "live", "known", "verdict"),
    [
        (BrevJobLostError("job missing"), listed("theirs"), {"ours"}, LOST_REPLACED),
        (BrevInstanceNotFoundError("x"), listed("theirs"), {"ours"}, LOST_REPLACED),
        (BrevConnectionLostError("x"), listed("theirs"), {"ours"}, LOST_REPLACED),
        (BrevJobLostError("job missing"), listed("ours"), {"ours"}, None),  # our instance is there
        (BrevInstanceNotFoundError("x"), None, {"ours"}, LOST_MISSING),
        (BrevInstanceNotFoundError("x"), listed("theirs"), set(), None),  # nothing recorded: the name decides
    ],
)
def test_a_name_held_by_another_id_is_a_replaced_instance(error, live, known, verdict):
    assert diagnose_loss(error, live, reachable=False, known_ids=known) == verdict


def test_no_probe_is_run_on_an_instance_that_is_not_ours():
    error = BrevConnectionLostError("x")
    assert needs_probe(error, listed("ours"), {"ours"})
    assert not needs_probe(error, listed("theirs"), {"ours"})


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
    ("overrides", "action", "in_message"),
    [
        ({"loss": LOST_REPLACED}, GIVE_UP, "created by someone else"),
        ({"loss": LOST_REPLACED, "ephemeral": True}, GIVE_UP, "cannot re-create its own under the taken name"),
        ({"expires_at": LOST_AT}, GIVE_UP, "expired at 2026-03-01 12:30 UTC"),
        ({"expires_at": LOST_AT - timedelta(hours=1)}, GIVE_UP, "Raise max_lifetime"),
        ({"expires_at": LOST_AT, "ephemeral": True, "owned": None}, GIVE_UP, "janitor deletes expired instances"),
        ({"expires_at": LOST_AT + timedelta(seconds=1)}, RECOVER, "recovery 1/2"),  # not expired yet
        ({"expires_at": None}, RECOVER, "recovery 1/2"),  # an explicit name carries no expiry
    ],
)
def test_a_replaced_or_expired_instance_is_not_recreated(overrides, action, in_message):
    decision = decide(**overrides)
    assert decision.action == action
    assert in_message in decision.message

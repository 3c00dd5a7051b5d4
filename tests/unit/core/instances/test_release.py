"""How a teardown ends an instance (airflow_provider_brev/core/instances/release.py): the release policies, and a delete
task's checked, frozen parameters (built by core.validation.delete_spec)."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_brev.core.instances.release import RELEASE_DELETE, RELEASE_STOP, DeleteSpec, release_policy
from airflow_provider_brev.exceptions import BrevInvalidInputError, retry_policy


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "delete"),
        ("", "delete"),
        ("  ", "delete"),
        ("delete", "delete"),
        (" Delete ", "delete"),
        ("stop", "stop"),
        ("STOP", "stop"),
    ],
)
def test_a_rendered_release_is_delete_or_stop(value, expected):
    assert release_policy(value) == expected
    assert (RELEASE_DELETE, RELEASE_STOP) == ("delete", "stop")


@pytest.mark.parametrize("value", ["keep", "stopped", 0, "delete,stop"])
def test_any_other_release_is_refused_before_anything_is_asked_of_brev(value):
    with pytest.raises(BrevInvalidInputError, match="use 'delete' or 'stop'") as caught:
        release_policy(value)
    assert f"Invalid release {value!r}" in str(caught.value)
    assert retry_policy(caught.value) == "never"


def test_a_delete_spec_is_frozen_and_says_whether_to_stop():
    spec = DeleteSpec("box", wait_for_deletion=False, deletion_timeout=600.0)
    assert spec.release == RELEASE_DELETE
    assert not spec.stop
    assert DeleteSpec("box", False, 600.0, release=RELEASE_STOP).stop
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.release = RELEASE_STOP  # type: ignore[misc]

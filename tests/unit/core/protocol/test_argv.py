"""Unit tests of ``airflow_provider_brev/core/protocol/argv.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol.argv import instance_type_list, start_args, stop_args
from airflow_provider_brev.exceptions import BrevInvalidInputError


@pytest.mark.parametrize(
    ("gpu", "types", "expected"),
    [
        ("L40S:1", None, ("L40S:1", None)),
        ("  ", "a.b, c.d", (None, ["a.b", "c.d"])),
        ("", [], (None, None)),
        (None, ["g6e.xlarge"], (None, ["g6e.xlarge"])),
    ],
)
def test_instance_type_list(gpu, types, expected):
    assert instance_type_list(gpu, types) == expected


@pytest.mark.parametrize(("gpu", "types"), [("L40S:1", ["g6e.xlarge"]), ("L40S:0", None), (None, ["bad type"])])
def test_instance_type_list_rejects(gpu, types):
    with pytest.raises(BrevInvalidInputError):
        instance_type_list(gpu, types)


@pytest.mark.parametrize(
    ("build", "target", "expected"),
    [
        (stop_args, "id-1", ["stop", "id-1"]),
        (start_args, "id-1", ["start", "-d", "id-1"]),  # detached: without -d the CLI polls forever
        (start_args, "w-1", ["start", "-d", "w-1"]),
    ],
)
def test_stop_and_start_name_one_instance(build, target, expected):
    assert build(target) == expected

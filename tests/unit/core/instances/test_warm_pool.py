"""What an instance bills per hour in its status (``billed_per_hour``): a STOPPED one its disk alone."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.instances.warm_pool import billed_per_hour
from airflow_provider_brev.core.protocol.output import InstanceTypeOffer

L40S = InstanceTypeOffer(
    "g6e.xlarge",
    "L40S",
    1,
    48,
    48,
    2.24,
    raw={"disk_min_gb": 250, "disk_max_gb": 16000, "disk_price_per_gb_mo": 0.1, "target_disk_gb": 250},
)
#: 250 GB at $0.10 per GB-month over a 730-hour month.
DISK_PER_HOUR = round(250 * 0.1 / 730, 6)


@pytest.mark.parametrize(
    ("status", "billed"),
    [
        ("STOPPED", (DISK_PER_HOUR, "disk")),
        ("STOPPING", (2.24, "instance")),  # the machine bills until it has stopped
        ("RUNNING", (2.24, "instance")),
        ("STARTING", (2.24, "instance")),
        ("DEPLOYING", (2.24, "instance")),
        ("DELETING", (2.24, "instance")),
        (None, (2.24, "instance")),
    ],
)
def test_a_stopped_instance_bills_its_disk_alone(status, billed):
    assert billed_per_hour(status, L40S) == billed


def test_an_unpriced_disk_bills_nothing_stopped_and_an_unknown_type_is_unpriced():
    no_disk_price = InstanceTypeOffer("gpu_1x_h100_pcie", "H100", 1, 80, 80, 2.99, raw={"disk_price_per_gb_mo": 0})
    assert billed_per_hour("STOPPED", no_disk_price) == (0.0, "disk")
    assert billed_per_hour("STOPPED", None) == (None, "")
    assert billed_per_hour("RUNNING", None) == (None, "")

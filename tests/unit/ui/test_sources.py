"""What the Brev page reads (ui/sources.py) is what the provider writes: the same XCom keys and Variable prefix, and
no listing without a connection."""

from __future__ import annotations

from airflow_provider_brev.core.instances.warm_pool_records import RECORD_PREFIX, record_variable
from airflow_provider_brev.cost.ledger import XCOM_COST, XCOM_LIFETIME_COST, XCOM_RUN_COST
from airflow_provider_brev.instances.records import XCOM_INSTANCE_RECORD
from airflow_provider_brev.ui.sources import PAGE_KEYS, LiveListing


def test_the_page_reads_the_keys_the_tasks_write() -> None:
    assert set(PAGE_KEYS) == {XCOM_INSTANCE_RECORD, XCOM_COST, XCOM_LIFETIME_COST, XCOM_RUN_COST}
    assert record_variable("abc123").startswith(RECORD_PREFIX)


def test_without_a_connection_there_is_no_live_state_and_the_page_says_why() -> None:
    live, note = LiveListing("").get()
    assert live is None and "ui_conn_id is empty" in note

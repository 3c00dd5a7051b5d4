"""Unit tests of ``airflow_provider_brev/triggers/lepton.py``."""

from __future__ import annotations


def test_the_trigger_serialises_declaratively_with_its_absolute_deadline():
    import json

    from airflow_provider_brev.triggers.lepton import LeptonJobTrigger

    trigger = LeptonJobTrigger(
        job="af-x-t1", since_ns=5, deadline=100.0, queue_timeout=60, try_number=2, secret="S1", not_before=1.0
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_provider_brev.triggers.lepton.LeptonJobTrigger"
    assert LeptonJobTrigger(**kwargs).serialize() == (path, kwargs)  # a restarted triggerer resumes the same follow
    assert kwargs["deadline"] == 100.0 and kwargs["since_ns"] == 5
    assert set(json.loads(json.dumps(kwargs))) == {*LeptonJobTrigger.serialized_fields, "not_before"}

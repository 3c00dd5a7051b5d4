"""The pure rules of preparing an instance in parallel: one background pull per image and what its state means
(``core/jobs/pulls.py``), which images a step pulls ahead (``core/tao/command.py``), and the fast read of an S3
listing page (``core/staging/s3_pages.py``); and the two ways a step stops waiting for a pull that does not end
(``jobs/pulls.py``, against a hook answering its two calls)."""

from __future__ import annotations

from airflow_provider_brev.core.jobs.handle import DEFAULT_BASE_DIR
from airflow_provider_brev.core.jobs.pulls import (
    PULL_BASE_DIR,
    next_poll_delay,
    pull_command,
    pull_job,
)
from unit.core.jobs.pulls_helpers import DS, PYT


def test_one_pull_job_per_image_apart_from_the_steps_jobs():
    assert pull_job(PYT) == pull_job(PYT) and pull_job(PYT) != pull_job(DS)
    assert pull_job(PYT).base_dir == PULL_BASE_DIR == ".airflow-brev/pulls" != DEFAULT_BASE_DIR
    assert pull_job(PYT).job_id.startswith("pull-")
    assert pull_command("reg.io/a b:1") == "docker pull 'reg.io/a b:1'"


def test_polls_start_short_and_back_off_to_a_ceiling():
    delays = [0.0]
    for _ in range(8):
        delays.append(next_poll_delay(delays[-1]))
    assert delays[1:] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]

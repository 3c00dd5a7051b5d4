"""The pure rules of preparing an instance in parallel: one background pull per image and what its state means
(``core/jobs/pulls.py``), which images a step pulls ahead (``core/tao/command.py``), and the fast read of an S3
listing page (``core/staging/s3_pages.py``); and the two ways a step stops waiting for a pull that does not end
(``jobs/pulls.py``, against a hook answering its two calls)."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_brev.core.jobs.handle import DEFAULT_BASE_DIR, FINISHED, LOST, MISSING, RUNNING
from airflow_provider_brev.core.jobs.pulls import (
    PULL_BASE_DIR,
    next_poll_delay,
    pull_command,
    pull_job,
    pull_outcome,
    pull_start,
)
from airflow_provider_brev.core.jobs.remote import LaunchResult, PollResult
from airflow_provider_brev.core.staging.s3_pages import split_contents
from airflow_provider_brev.core.tao.command import images_to_prefetch
from airflow_provider_brev.exceptions import BrevImagePullError, BrevTaskKilledError
from airflow_provider_brev.jobs.pulls import await_pull

PYT = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt"
DS = "nvcr.io/nvidia/tao/tao-toolkit:6.26.3-data-services"


def poll(state: str, exit_code: int | None = None) -> PollResult:
    return PollResult(state=state, exit_code=exit_code, log_size=0, pid=None)


def test_one_pull_job_per_image_apart_from_the_steps_jobs():
    assert pull_job(PYT) == pull_job(PYT) and pull_job(PYT) != pull_job(DS)
    assert pull_job(PYT).base_dir == PULL_BASE_DIR == ".airflow-brev/pulls" != DEFAULT_BASE_DIR
    assert pull_job(PYT).job_id.startswith("pull-")
    assert pull_command("reg.io/a b:1") == "docker pull 'reg.io/a b:1'"


@pytest.mark.parametrize(
    ("launch", "found"),
    [
        (LaunchResult(launched=True, pid=7), "started"),
        (LaunchResult(launched=False, existing=poll(RUNNING)), "running"),
        (LaunchResult(launched=False, existing=poll(FINISHED, 0)), "done"),
        (LaunchResult(launched=False, existing=poll(FINISHED, 1)), "restart"),
        (LaunchResult(launched=False, existing=poll(FINISHED, None)), "restart"),
        (LaunchResult(launched=False, existing=poll(LOST)), "restart"),
        (LaunchResult(launched=False, existing=poll(MISSING)), "restart"),
        # the state decides, not an exit code alone: only a finished pull is the image's done-marker
        (LaunchResult(launched=False, existing=poll(LOST, 0)), "restart"),
        (LaunchResult(launched=False, existing=poll(MISSING, 0)), "restart"),
        (LaunchResult(launched=False), "restart"),
    ],
)
def test_what_starting_a_pull_finds(launch, found):
    assert pull_start(launch) == found


@pytest.mark.parametrize(
    ("state", "exit_code", "outcome"),
    [
        (RUNNING, None, "wait"),
        (FINISHED, 0, "done"),
        (FINISHED, 1, "failed"),
        (LOST, None, "failed"),
        (MISSING, None, "failed"),
        (LOST, 0, "failed"),
        (MISSING, 0, "failed"),
    ],
)
def test_what_a_poll_of_a_pull_means(state, exit_code, outcome):
    assert pull_outcome(poll(state, exit_code)) == outcome


def test_polls_start_short_and_back_off_to_a_ceiling():
    delays = [0.0]
    for _ in range(8):
        delays.append(next_poll_delay(delays[-1]))
    assert delays[1:] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


#: (case, the images later steps declare, what the step with the data-services image pulls ahead)
PREFETCH = [
    ("a later step's full reference", [PYT], [PYT]),
    ("each once, in order", [PYT, "docker.io/library/ubuntu:22.04", PYT], [PYT, "docker.io/library/ubuntu:22.04"]),
    ("not its own image", [DS], []),
    ("its own image, padded", [" " + DS], []),
    ("a padded reference, stripped", [" " + PYT + " "], [PYT]),
    ("a template", ["{{ params.image }}"], []),
    ("a templated tag", ["nvcr.io/nvidia/tao/tao-toolkit:{{ params.tag }}"], []),
    ("a Jinja block", ["{% if x %}nvcr.io/nvidia/tao/tao-toolkit:6.26.3-pyt{% endif %}"], []),
    ("no tag", ["nvcr.io/x/y"], []),
    ("no registry", ["ubuntu:22.04"], []),
    ("not a string", [None, 3], []),
    ("nothing declared", [], []),
]


@pytest.mark.parametrize(("case", "declared", "pulled"), PREFETCH, ids=[r[0] for r in PREFETCH])
def test_the_images_pulled_ahead_are_later_full_untemplated_references_each_once(case, declared, pulled):
    assert images_to_prefetch(DS, declared) == pulled, case


PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>b</Name><Prefix>ds/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
    b"<Contents><Key>ds/a&lt;Contents&gt;.jpg</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
    b"<ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass>"
    b"</Contents><Contents><Key>ds/b%20c</Key><ETag>&quot;abc-2&quot;</ETag><Size>20</Size></Contents>"
    b"<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"
)


def test_a_listing_page_is_split_into_its_objects_and_its_envelope():
    contents, envelope = split_contents(PAGE)
    assert contents == [
        {"Key": "ds/a<Contents>.jpg", "Size": 1, "ETag": '"0cc175b9c0f1b6a831c399e269772661"'},
        {"Key": "ds/b%20c", "Size": 20, "ETag": '"abc-2"'},
    ]
    assert b"Contents>" not in envelope.replace(b"&lt;Contents&gt;", b"")
    assert b"<NextContinuationToken>tok</NextContinuationToken>" in envelope and b"<IsTruncated>true" in envelope
    with pytest.raises(ValueError, match="Not an S3 listing page"):
        split_contents(b"<html>")


NS = b' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
OBJ = b"<Key>ds/a</Key><ETag>&quot;e1&quot;</ETag><Size>3</Size>"

#: (case, the ListBucketResult's attributes, its one <Contents> element's children, the objects read)
PAGES = [
    ("namespaced, as S3 sends it", NS, OBJ, [{"Key": "ds/a", "Size": 3, "ETag": '"e1"'}]),
    ("no namespace (another S3 endpoint)", b"", OBJ, [{"Key": "ds/a", "Size": 3, "ETag": '"e1"'}]),
    ("no ETag", NS, b"<Key>ds/a</Key><Size>0</Size>", [{"Key": "ds/a", "Size": 0, "ETag": ""}]),
    ("an empty ETag", NS, b"<Key>ds/a</Key><ETag></ETag><Size>1</Size>", [{"Key": "ds/a", "Size": 1, "ETag": ""}]),
    ("no Key: not an object", NS, b"<ETag>e</ETag><Size>3</Size>", []),
    ("no Size: not an object", NS, b"<Key>ds/a</Key><ETag>e</ETag>", []),
    ("a negative Size", NS, b"<Key>ds/a</Key><Size>-1</Size>", []),
    ("a Size that is not a count", NS, b"<Key>ds/a</Key><Size>1.5</Size>", []),
]


@pytest.mark.parametrize(("case", "attributes", "element", "objects"), PAGES, ids=[r[0] for r in PAGES])
def test_what_a_listing_pages_contents_element_gives(case, attributes, element, objects):
    page = (
        b"<ListBucketResult" + attributes + b"><Name>b</Name><Contents>" + element + b"</Contents></ListBucketResult>"
    )
    contents, envelope = split_contents(page)
    assert contents == objects, case
    assert envelope == b"<ListBucketResult" + attributes + b"><Name>b</Name></ListBucketResult>"


class PullHook:
    """The two calls :func:`await_pull` makes, answered as a pull that never ends (the I/O boundary only)."""

    def __init__(self) -> None:
        self.killed: list[str] = []

    def poll_job(self, name, job, *, offset, wait=0.0):
        return PollResult(state=RUNNING, exit_code=None, log_size=5, pid=7, chunk=b"layer", offset=offset)

    def kill_job(self, name, job, *, grace_seconds):
        self.killed.append(job.job_id)
        return "killed"


def test_a_pull_that_outlives_pull_timeout_is_stopped_and_fails_the_step():
    hook = PullHook()
    with pytest.raises(BrevImagePullError, match=r"did not finish within pull_timeout \(0 s\)"):
        await_pull(hook, "box", PYT, timeout=0, log=logging.getLogger("t"), killed=lambda: False)
    assert hook.killed == [pull_job(PYT).job_id]


def test_a_killed_task_stops_waiting_and_leaves_the_shared_pull_running():
    hook = PullHook()
    with pytest.raises(BrevTaskKilledError, match="killed while waiting for the pull"):
        await_pull(hook, "box", PYT, timeout=60, log=logging.getLogger("t"), killed=lambda: True)
    assert hook.killed == []

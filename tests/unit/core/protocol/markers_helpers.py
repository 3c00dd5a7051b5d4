"""Test helpers shared by ``core/protocol/test_markers.py``, ``core/protocol/test_remote_scripts.py`` (one definition,
imported by each)."""

from __future__ import annotations

from airflow_provider_brev.core.protocol import markers as m

#: (line, kind, fields, text): one row per kind, as the scripts print it
ROWS = [
    ("BREV_JOB_STATUS job-1 running - 120 4242", m.JOB_STATUS, ("job-1", "running", "-", "120", "4242"), None),
    ("BREV_JOB_LOG_BEGIN", m.JOB_LOG_BEGIN, (), None),
    ("BREV_JOB_LOG_END", m.JOB_LOG_END, (), None),
    ("BREV_JOB_LAUNCHED job-1 4242", m.JOB_LAUNCHED, ("job-1", "4242"), None),
    ("BREV_JOB_EXISTS job-1", m.JOB_EXISTS, ("job-1",), None),
    ("BREV_JOB_LAUNCH_FAILED job-1 missing-setsid", m.JOB_LAUNCH_FAILED, ("job-1", "missing-setsid"), None),
    ("BREV_JOB_KILLED job-1 terminated", m.JOB_KILLED, ("job-1", "terminated"), None),
    ("BREV_JOB_CLEANED job-1 removed", m.JOB_CLEANED, ("job-1", "removed"), None),
    ("BREV_XFER_OK 0.3 10 " + "a" * 32 + " e3", m.XFER_OK, ("0.3", "10", "a" * 32, "e3"), None),
    ("BREV_XFER_FAIL 1 curl exit 7 (HTTP 000)", m.XFER_FAIL, ("1", "curl"), "exit 7 (HTTP 000)"),
    ("BREV_XFER_ERROR the plan file is missing", m.XFER_ERROR, (), "the plan file is missing"),
    ("BREV_XFER_DONE 4", m.XFER_DONE, ("4",), None),
    ("BREV_XFER_CLEANED", m.XFER_CLEANED, (), None),
    ("BREV_XFER_FILE 12 - 12/1/2/3 a b/c.txt", m.XFER_FILE, ("12", "-", "12/1/2/3"), "a b/c.txt"),
    ("BREV_XFER_UNREADABLE locked file.bin", m.XFER_UNREADABLE, (), "locked file.bin"),
    ("BREV_XFER_LISTED 2 3", m.XFER_LISTED, ("2", "3"), None),
    ("BREV_XFER_NODIR", m.XFER_NODIR, (), None),
    ('BREV_XFER_MANIFEST {"key": "a b"}', m.XFER_MANIFEST, (), '{"key": "a b"}'),
    ("BREV_TAO_STATUS eyJzIjoxfQ==", m.TAO_STATUS, (), "eyJzIjoxfQ=="),
    ("BREV_TAO_STARTED 1000", m.TAO_STARTED, ("1000",), None),
    (
        "BREV_TAO_CKPT 1002.5 2048 sub dir/model_epoch_001.pth",
        m.TAO_CKPT,
        ("1002.5", "2048"),
        "sub dir/model_epoch_001.pth",
    ),
    ("BREV_TAO_FILE metrics.json e30=", m.TAO_FILE, ("metrics.json",), "e30="),
    ("BREV_TAO_FAULT Q1VEQQ==", m.TAO_FAULT, (), "Q1VEQQ=="),
    ("BREV_TAO_END", m.TAO_END, (), None),
    ("BREV_FG_KILLED", m.FG_KILLED, (), None),
    ("BREV_FG_NONE", m.FG_NONE, (), None),
]

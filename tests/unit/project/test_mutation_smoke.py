"""A fixed sample of ``make mutation`` (mutation/README.md), in ``make test``: these mutants of the pure core must be
killed by the named tests, and a mutant those tests never reach must survive (the harness can tell the two apart).
One harness run, the named test functions only (not their whole files). An id that no longer exists fails the run:
the code changed, choose another."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

MARKERS = "tests/unit/core/protocol/test_classify.py"
READINESS = "tests/unit/core/instances/test_readiness.py"
PATHS = "tests/unit/core/staging/test_paths.py"

#: (mutant id, the test function that kills it, what it breaks)
KILLED = [
    (
        "protocol.classify:<module>:element-drop:473e3bd2",
        f"{MARKERS}::test_each_cli_phrase_decides_its_verdict",
        "a 403 from the API is no longer 'logged out'",
    ),
    (
        "protocol.classify:<module>:string:194618a6",
        f"{MARKERS}::test_each_cli_phrase_decides_its_verdict",
        "a bare 'no capacity' is no longer a capacity verdict",
    ),
    (
        "protocol.classify:<module>:string:9b666cc2",
        f"{MARKERS}::test_each_cli_phrase_decides_its_verdict",
        "'instance with id/name X not found' is no longer 'not found'",
    ),
    (
        "instances.recovery:validate_budget:compare-boundary:0a99b4e3",
        "tests/unit/core/instances/test_recovery.py::test_zero_recoveries_is_a_valid_budget_that_turns_recovery_off",
        "max_instance_recoveries=0 is refused",
    ),
    (
        "instances.readiness:next_poll_interval:compare-boundary:e7f00e0c",
        f"{READINESS}::test_the_back_off_starts_at_one_minute_in_a_stage_and_caps_at_one_and_a_half_seconds",
        "the back-off starts a tick later",
    ),
    (
        "instances.readiness:<module>:number:7e41b70e",
        f"{READINESS}::test_stage_names_and_constants_are_fixed",
        "the back-off cap is 2.5 s",
    ),
    (
        "staging.paths:normalize_prefix:element-drop:92e72f8b",
        f"{PATHS}::test_s3_prefixes_with_control_characters_are_refused",
        "a NUL in an S3 prefix is accepted",
    ),
    (
        "staging.paths:glob_to_regex:string:fcc85e2a",
        f"{PATHS}::test_globs_translate_to_one_regex",
        "a leading '**/' no longer matches zero directories",
    ),
    (
        "staging.rounds:StagedDownload.settle:boolop-drop:ed107d01",
        "tests/unit/core/staging/test_reports.py::test_a_download_settles_only_with_the_right_size_and_md5",
        "the size is unchecked when the md5 is unknown",
    ),
    (
        "jobs.handle:check_path:raise-delete:51b6aa83",
        "tests/unit/core/jobs/test_handle.py::test_remote_paths_are_refused_for_their_reason",
        "an empty secret-file path is accepted",
    ),
]
#: a job-state mutant of jobs.handle, whose path checks the tests above run but which none of them reads (the
#: pull and job-attempt tests kill it): survives
CONTROL = "jobs.handle:<module>:string:cf479b19"


def test_a_fixed_sample_of_mutants_is_killed_and_a_control_survives(tmp_path):
    tests = sorted({test for _mutant, test, _why in KILLED})
    report = tmp_path / "sample.json"
    command = [sys.executable, "-m", "mutation", "--ids", ",".join([m for m, _, _ in KILLED] + [CONTROL])]
    command += ["--tests", *tests, "--report", str(tmp_path / "sample.md"), "--json", str(report), "--jobs", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    statuses = {m["id"]: m["status"] for m in json.loads(report.read_text())["mutants"]}
    survivors = [f"{mutant} ({why}; {test})" for mutant, test, why in KILLED if statuses[mutant] != "killed"]
    assert not survivors, f"no test notices: {survivors}"
    assert statuses[CONTROL] == "survived"

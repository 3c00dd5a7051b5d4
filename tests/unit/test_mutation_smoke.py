"""A fixed sample of ``make mutation`` (mutation/README.md), in ``make test``: these mutants of the pure core must be
killed by the named test files, and a mutant run against a test file that never reaches it must survive (the
harness can tell the two apart). An id that no longer exists fails the run: the code changed, choose another."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: (mutant id, what it breaks)
KILLED = [
    ("protocol.classify:<module>:element-drop:473e3bd2", "a 403 from the API is no longer 'logged out'"),
    ("protocol.classify:<module>:string:194618a6", "a bare 'no capacity' is no longer a capacity verdict"),
    ("protocol.classify:<module>:string:9b666cc2", "'instance with id/name X not found' is no longer 'not found'"),
    ("instances.recovery:validate_budget:compare-boundary:0a99b4e3", "max_instance_recoveries=0 is refused"),
    ("instances.readiness:next_poll_interval:compare-boundary:e7f00e0c", "the back-off starts a tick later"),
    ("instances.readiness:<module>:number:7e41b70e", "the back-off cap is 2.5 s"),
    ("transfer.paths:normalize_prefix:element-drop:92e72f8b", "a NUL in an S3 prefix is accepted"),
    ("transfer.paths:glob_to_regex:string:fcc85e2a", "a leading '**/' no longer matches zero directories"),
    ("transfer.rounds:StagedDownload.settle:boolop-drop:ed107d01", "the size is unchecked when the md5 is unknown"),
    ("jobs.handle:check_path:raise-delete:51b6aa83", "an empty secret-file path is accepted"),
]
KILLER_TESTS = [
    "tests/unit/test_classify_markers.py",
    "tests/unit/test_core_edges.py",
    "tests/unit/test_readiness_details.py",
    "tests/unit/test_transfer_path_rules.py",
    "tests/unit/test_transfer_decisions.py",
    "tests/unit/test_jobs_details.py",
]
#: a classifier mutant, run against the instance-name tests (which never classify anything): survives
CONTROL = "protocol.classify:<module>:string:194618a6"
CONTROL_TESTS = ["tests/unit/test_names.py"]


def _run(tmp_path: Path, ids: list[str], tests: list[str], name: str) -> dict[str, str]:
    report = tmp_path / f"{name}.json"
    command = [sys.executable, "-m", "mutation", "--ids", ",".join(ids), "--tests", *tests]
    command += ["--report", str(tmp_path / f"{name}.md"), "--json", str(report), "--jobs", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return {m["id"]: m["status"] for m in json.loads(report.read_text())["mutants"]}


def test_a_fixed_sample_of_mutants_is_killed_and_a_control_survives(tmp_path):
    statuses = _run(tmp_path, [mutant for mutant, _ in KILLED], KILLER_TESTS, "sample")
    survivors = [f"{mutant} ({why})" for mutant, why in KILLED if statuses[mutant] != "killed"]
    assert not survivors, f"no test notices: {survivors}"
    assert _run(tmp_path, [CONTROL], CONTROL_TESTS, "control") == {CONTROL: "survived"}

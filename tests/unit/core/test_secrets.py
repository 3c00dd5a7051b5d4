"""One redaction rule for every compute (airflow_provider_brev/core/secrets.py): the awk filter on a Brev instance, the
agent in a Lepton job (its plan carries the fragments the worker computed) and the worker's own redaction of a
Lepton job's log turn the same output into the same text, for a table of secret values."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_provider_brev.core.jobs.shell import redact_filter
from airflow_provider_brev.core.lepton.agent import PLAN_ENV, agent_source, encode_plan, job_plan
from airflow_provider_brev.core.lepton.report import parse_result
from airflow_provider_brev.core.secrets import redact, redaction_fragments, secret_fragments
from unit.core.jobs.shell_helpers import SECRET_LINES
from unit.core.jobs.test_shell import CREDENTIAL, PEM, awks, with_awk

#: Sets of secret values (name -> value), each a case of the rule.
SECRET_SETS = {
    "single line": {"TOKEN": "s3cr3t-token-123"},
    "multi-line PEM": {"PEM": PEM},
    "JSON with short lines": {"CREDENTIAL": CREDENTIAL},
    "a value inside another": {"LONG": "prefix-inner-secret-suffix", "SHORT": "inner-secret"},
    "equal lengths overlapping": {"A": "abcde-12", "B": "e-12wxyz"},
    "whitespace-only lines": {"SPACED": "first line here\n   \n\t\n \t \nsecond line here\n"},
    "windows line ends and unicode": {"CRLF": "line one\r\nline two\r\n", "UNI": "ÄÖ\né€ü\nü\n"},
    "a one-character value": {"X": "q"},
}


def output_lines(secret_env: dict[str, str]) -> list[str]:
    """What a command might print: every line of every value, each value whole, fragments inside other text,
    lines the rule must leave alone."""
    lines = ["no secret here", "{", "", "   ", "-----"]
    for value in secret_env.values():
        lines += value.split("\n")
        lines.append(value.replace("\n", " ").replace("\r", " "))
        lines += [f"key={fragment}; again {fragment}." for fragment in secret_fragments(value)]
    return lines


def through_awk(tmp_path, awk: str, secret_env: dict[str, str], lines: list[str]) -> list[str]:
    done = subprocess.run(
        ["bash", "-c", redact_filter(secret_env)],
        input=("\n".join(lines) + "\n").encode(),
        env={**with_awk(tmp_path, awk), **secret_env},
        capture_output=True,
        check=True,
    )
    return done.stdout.decode().split("\n")[:-1]


def through_agent(tmp_path, secret_env: dict[str, str], lines: list[str]) -> tuple[list[str], str]:
    """The Lepton agent's log lines (its result line apart) and its log file, the command printing ``lines``."""
    work = tmp_path / "agent"
    work.mkdir()
    (work / "out.txt").write_bytes(("\n".join(lines) + "\n").encode())
    plan = job_plan(
        command="cat out.txt",
        secret_env=secret_env,
        inputs=[],
        outputs=[],
        files={},
        report=None,
        sync_interval=None,
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", agent_source()],
        cwd=work,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", PLAN_ENV: encode_plan(plan)},
        capture_output=True,
        check=True,
    )
    shown = done.stdout.decode().split("\n")[:-1]
    assert parse_result(shown[-1]) is not None and parse_result(shown[-1]).exit_code == 0
    return shown[:-1], (work / ".airflow-lepton" / "job.log").read_bytes().decode()


@pytest.mark.parametrize("case", list(SECRET_SETS))
def test_brev_and_lepton_redact_alike(tmp_path, case):
    secret_env = SECRET_SETS[case]
    lines = output_lines(secret_env)
    fragments = redaction_fragments(secret_env)
    on_the_worker = [redact(line, fragments) for line in lines]
    agent_lines, agent_file = through_agent(tmp_path, secret_env, lines)
    assert agent_lines == on_the_worker
    assert agent_file == "\n".join(on_the_worker) + "\n"
    for awk in awks():
        assert through_awk(tmp_path, awk, secret_env, lines) == on_the_worker, awk
    for fragment in fragments:  # nothing of the rule's fragments is left, and not everything went
        assert all(fragment not in line for line in on_the_worker)
    assert on_the_worker[:5] == ["no secret here", "{", "", "   ", "-----"]


def test_the_fragments_of_a_set_are_replaced_longest_first_in_name_order():
    assert redaction_fragments({"SHORT": "inner-secret", "LONG": "prefix-inner-secret-suffix"}) == [
        "prefix-inner-secret-suffix",
        "inner-secret",
    ]
    assert redaction_fragments({"B": "e-12wxyz", "A": "abcde-12"}) == ["abcde-12", "e-12wxyz"]  # equal: by name
    assert redaction_fragments({"U": "é€é\nabcdef"}) == ["é€é", "abcdef"]  # 7 bytes before 6, not 3 characters
    assert redact("abcde-12wxyz", redaction_fragments({"B": "e-12wxyz", "A": "abcde-12"})) == "***wxyz"
    assert redaction_fragments({}) == [] and redact("text", []) == "text"


def test_secret_fragments_of_single_and_multi_line_values():
    assert secret_fragments("") == []
    assert secret_fragments("ab") == ["ab"]  # a one-line value is redacted whole, however short
    assert secret_fragments(" padded ") == [" padded "]
    assert secret_fragments(PEM) == ["-----BEGIN PRIVATE KEY-----", *SECRET_LINES[:2], "-----END PRIVATE KEY-----"]
    assert secret_fragments(CREDENTIAL) == [
        '"type": "service_account",',
        *SECRET_LINES[2:],
        '"scopes": [',
        '"storage"',
        '"n": 1',
    ]
    # Empty, tiny and punctuation-only lines are not secrets: redacting them would redact all output.
    assert secret_fragments('{\n\n  },\n-----\n\t[""]\nab\nabcd\n') == []
    assert secret_fragments("é€\nÄÖ\nü\n") == ["é€"]  # bytes count (5 and 4 here), as the filter counts them


@pytest.mark.parametrize("awk", awks())
@pytest.mark.parametrize(
    "value",
    [PEM, CREDENTIAL, "one-line", "x", "a\nb", "line one\r\nline two\r\n", "  spaced out  \n}\n", "ÄÖ\né€\nü\n"],
)
def test_the_filter_redacts_exactly_the_fragments_the_masker_knows(tmp_path, awk, value):
    """The rule is written twice (awk on the instance, Python for Airflow's masker): they must agree."""
    lines = [*value.split("\n"), value, "no secret here"]
    done = subprocess.run(
        ["bash", "-c", redact_filter(["V"])],
        input=("\n".join(lines) + "\n").encode(),
        env={**with_awk(tmp_path, awk), "V": value},
        capture_output=True,
    )
    fragments = redaction_fragments({"V": value})
    expected = [redact(line, fragments) for line in "\n".join(lines).split("\n")]
    assert done.stdout.decode().split("\n")[:-1] == expected


def test_the_airflow_masker_knows_every_line_of_a_multi_line_secret():
    try:
        from airflow.sdk.log import redact
    except ImportError:  # Airflow 3.0
        from airflow.sdk.execution_time.secrets_masker import redact

    from airflow_provider_brev._compat import mask_secret

    mask_secret(PEM)
    mask_secret(CREDENTIAL)
    for line in SECRET_LINES:
        assert redact(f"[box] {line}") == "[box] ***"
    assert redact("{") == "{" and redact("}") == "}"  # trivial lines stay

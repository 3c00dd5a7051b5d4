"""Go's text/template as ``docker inspect -f`` and ``docker ps --format`` users write it."""

from __future__ import annotations

import re

import pytest

from airflow_provider_brev.testing.fake_docker.gotemplate import TemplateError, go_str, render

CONTAINER = {
    "Id": "c0ffee",
    "State": {"Status": "exited", "Running": False, "ExitCode": 143, "Pid": 0},
    "Config": {"Labels": {"team": "vision", "app": "tao"}, "Cmd": ["sleep", "5"], "Entrypoint": None},
    "Mounts": [{"Source": "/a", "Destination": "/b"}],
}


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{.State.Status}}", "exited"),
        ("{{.State.ExitCode}}", "143"),
        ("{{.State.Running}}", "false"),
        ("{{.Id}}", "c0ffee"),
        ("{{$.Id}}", "c0ffee"),
        ("{{.Config.Labels}}", "map[app:tao team:vision]"),
        ('{{index .Config.Labels "team"}}', "vision"),
        ('{{index .Config.Labels "absent"}}', ""),
        ("{{.Config.Labels.absent}}", "<no value>"),
        ("{{.Config.Cmd}}", "[sleep 5]"),
        ("{{.Config.Entrypoint}}", "<nil>"),
        ("{{json .Config.Labels}}", '{"team":"vision","app":"tao"}'),
        ("{{.Config.Labels | json}}", '{"team":"vision","app":"tao"}'),
        ("{{range $k, $v := .Config.Labels}}{{$k}}={{$v}} {{end}}", "app=tao team=vision "),
        ("{{range .Mounts}}{{.Source}}:{{.Destination}}{{end}}", "/a:/b"),
        ("{{if .State.Running}}up{{else}}down {{.State.ExitCode}}{{end}}", "down 143"),
        ('{{if eq .State.Status "exited"}}gone{{end}}', "gone"),
        ("{{with .State}}{{.Status}}/{{.Pid}}{{end}}", "exited/0"),
        ('{{len .Config.Cmd}} {{join .Config.Cmd ","}} {{upper .State.Status}}', "2 sleep,5 EXITED"),
        ('{{printf "%s=%d" .Id .State.ExitCode}}', "c0ffee=143"),
        ("{{$code := .State.ExitCode}}code {{$code}}", "code 143"),
        ("a {{- .Id -}} b", "ac0ffeeb"),
        ("{{/* a comment */}}x", "x"),
    ],
)
def test_templates_render_as_go_does(template: str, expected: str) -> None:
    assert render(template, CONTAINER) == expected


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{.Nope}}", 'map has no entry for key "Nope"'),
        ("{{nope .Id}}", 'function "nope" not defined'),
        ("{{.Id", "unclosed action"),
        ("{{if .Id}}x", "unexpected EOF"),
        ("{{end}}", "unexpected {{end}}"),
        ("{{$missing}}", 'undefined variable "$missing"'),
    ],
)
def test_bad_templates_fail_with_go_s_message(template: str, message: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(message)):
        render(template, CONTAINER)


def test_a_method_of_the_data_takes_the_argument() -> None:
    row = {"Label": lambda key: {"team": "vision"}.get(key, "")}
    assert render('{{.Label "team"}}|{{.Label "x"}}', row) == "vision|"


@pytest.mark.parametrize(
    ("value", "shown"), [(True, "true"), (3.0, "3"), (None, "<nil>"), ({"b": 1, "a": [1, 2]}, "map[a:[1 2] b:1]")]
)
def test_values_print_as_fmt_sprint(value: object, shown: str) -> None:
    assert go_str(value) == shown

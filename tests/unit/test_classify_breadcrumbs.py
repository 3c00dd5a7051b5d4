"""Every error text the CLI reports is classified the same with or without the CLI's breadcrumbs in front.

The error texts are those the released CLI prints (the simulator's profile ``released`` reproduces them); the
breadcrumbs are the lines it prints on stdout that are not errors (``core/protocol/classify.py``). A breadcrumb must never
change the verdict: in a session whose stored token is not a JWT, ``no oauth found for token`` precedes *every*
call's output, and "instance not found" must stay "not found" (a delete of a gone instance is success).
"""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol.classify import (
    classify_failure,
    is_logged_out,
    is_startup_breadcrumb,
    should_relogin,
    strip_breadcrumbs,
)
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLIError,
    BrevConnectionLostError,
    BrevDuplicateNameError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevTransientError,
)

MULTI = "1 error occurred:\n\t* [error] \ngithub.com/brevdev/brev-cli/pkg/cmd/delete.deleteWorkspace\ndelete.go:88\n: {}\n\n"

# (command, stdout, stderr, expected type): what the CLI reports on stderr (and stdout where it prints there).
ERRORS = [
    ("delete", "", MULTI.format("instance with id/name gone-1 not found"), BrevInstanceNotFoundError),
    ("delete", "", "unknown flag: --yes\n", BrevInvalidInputError),
    ("delete", "", "unknown shorthand flag: 'y' in -y\n", BrevInvalidInputError),
    ("orgs", "", 'unknown command "orgs" for "brev"\n\nDid you mean this?\n\torg\n', BrevInvalidInputError),
    ("ls", "", "unknown flag: --json\n", BrevInvalidInputError),
    ("create", "", "name is required\n", BrevInvalidInputError),
    ("delete", "", "instance name required: provide as argument or pipe from another command\n", BrevInvalidInputError),
    (
        "create",
        "",
        "no GPU instances match the specified filters. Try 'brev search' to see available options\n",
        BrevNoMatchingTypeError,
    ),
    (
        "create",
        "",
        "instance type \"zz.large\" is not a recognized type; run 'brev search' to see available types\n",
        BrevNoMatchingTypeError,
    ),
    (
        "create",
        "",
        'instance type "g6e.xlarge" is currently unavailable (no capacity); try again later or run '
        "'brev search' to find another type\n",
        BrevNoCapacityError,
    ),
    (
        "create",
        "",
        "[Worker 1] g6e.xlarge Failed: no capacity\nType g6e.xlarge had failures, trying next type...\n"
        "Warning: Only created 0/1 instances\ncould only create 0/1 instances\n",
        BrevNoCapacityError,
    ),
    (
        "create",
        "",
        'could not resolve workspace group for "g6e.xlarge" (instance-type listing was unavailable); please retry\n',
        BrevTransientError,
    ),
    (
        "create",
        "",
        "[Worker 1] g6e.xlarge Failed: https://api/instances 502 Bad Gateway\ncould only create 0/1 instances\n",
        BrevTransientError,
    ),
    (
        "create",
        "",
        "[Worker 1] g6e.xlarge Failed: duplicate workspace name\nError: workspace 'w-1' already exists. "
        "Use a different name or delete the existing workspace\n",
        BrevDuplicateNameError,
    ),
    ("ls", "", "https://api/workspaces 503 Service Unavailable\n", BrevTransientError),
    ("ls", "", "read tcp 1.2.3.4:5->6.7.8.9:443: read: connection reset by peer\n", BrevTransientError),
    (
        "exec",
        "",
        'Connection failed, checking instance status...\ninstance "w-1" is in state "DEPLOYING" — please check '
        "with: brev ls\n",
        BrevInstanceNotReadyError,
    ),
    (
        "exec",
        "",
        'Connection failed, checking instance status...\nssh connection failed and could not look up instance "w-1": '
        "exit status 255\nPlease check your instances with: brev ls\n",
        BrevInstanceNotFoundError,
    ),
    (
        "exec",
        "",
        'could not connect to instance "w-1": \nssh: connect to host 1.2.3.4 port 22: Connection refused\n'
        "Please check with: brev ls\n",
        BrevConnectionLostError,
    ),
    ("exec", "", "ssh: Could not resolve hostname w-1: Name or service not known\n", BrevConnectionLostError),
    (
        "ls",
        "You are currently logged out, would you like to log in? [Y/n]: ",
        "EOF\n",
        BrevAuthError,
    ),
    ("ls", "", "https://api/me?x=1 401 Unauthorized {}\n", BrevAuthError),
    ("ls", "", "declined to login\n", BrevAuthError),
    ("stop", "", MULTI.format('instance "w-1" does not support stop.'), BrevCLIError),
    # errors whose words reach only stdout: the breadcrumbs must not become part of the CLI's message
    ("ls", "You are currently logged out, would you like to log in? [Y/n]: ", "", BrevAuthError),
    ("ls", "https://api/workspaces 503 Service Unavailable\n", "", BrevTransientError),
]

BREADCRUMBS = [
    "",
    "no oauth found for token\n",
    "WARN: malformed refresh token, logging out\n",
    "warning: invalid refresh token | token expired\n",
    "   ▸     Starting Login\ncurrent organization: acme\n",
    "create an instance:\n\tbrev create my-instance\nlist your instances:\n\tbrev ls\n",
    "💡 Detected an AI coding agent. Install the Brev skill\n👋 New to Brev? Start here\n",
    "Agent pid 4242\n",
    "no oauth found for token\nWARN: malformed refresh token, logging out\nAgent pid 7\n",
]


@pytest.mark.parametrize("breadcrumb", BREADCRUMBS, ids=[f"crumb{i}" for i in range(len(BREADCRUMBS))])
@pytest.mark.parametrize(
    ("command", "stdout", "stderr", "expected"),
    ERRORS,
    ids=[f"{e[0]}:{e[3].__name__}:{i}" for i, e in enumerate(ERRORS)],
)
def test_breadcrumbs_never_change_the_verdict(breadcrumb, command, stdout, stderr, expected):
    plain = classify_failure(command, 1, stdout, stderr)
    assert type(plain) is expected
    crumbed = classify_failure(command, 1, breadcrumb + stdout, stderr)
    assert type(crumbed) is expected
    assert crumbed.cli_message == plain.cli_message  # the user sees the CLI's error, not the noise
    assert is_logged_out(breadcrumb + stdout, stderr) is (expected is BrevAuthError)


@pytest.mark.parametrize("breadcrumb", [b for b in BREADCRUMBS if b])
def test_breadcrumb_alone_is_not_logged_out(breadcrumb):
    assert not is_logged_out(breadcrumb, "")
    assert not should_relogin(
        authenticated=True, can_login=True, first_round=True, exit_code=1, stdout=breadcrumb, stderr="x"
    )
    assert strip_breadcrumbs(breadcrumb + "real error").strip() == "real error"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, True),
        ({"authenticated": False}, False),
        ({"can_login": False}, False),
        ({"first_round": False}, False),
        ({"exit_code": 0}, False),
    ],
)
def test_relogin_decision(kwargs, expected):
    base = {
        "authenticated": True,
        "can_login": True,
        "first_round": True,
        "exit_code": 1,
        "stdout": "no oauth found for token\nYou are currently logged out, would you like to log in? [Y/n]: ",
        "stderr": "EOF",
    }
    assert should_relogin(**{**base, **kwargs}) is expected


@pytest.mark.parametrize(
    ("line", "startup"),
    [
        ("no oauth found for token", True),
        ("  no oauth found for token  ", True),
        ("no oauth found for token: x", False),  # a command's own words, not the CLI's line
        ("current organization: acme", False),  # printed by `brev login` only, never before a command's output
        ("Agent pid 7", False),  # read by the hook's agent announcement, not here
        ("", False),
        ("work", False),
    ],
)
def test_only_the_clis_start_up_line_is_dropped_before_a_commands_output(line, startup):
    assert is_startup_breadcrumb(line) is startup

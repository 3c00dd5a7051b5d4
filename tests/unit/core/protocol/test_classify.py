"""Every phrase the failure classifier reads (``core/protocol/classify.py``) has a case that must match it and a near-miss
that must not: the same words in another tool's message, another form of the phrase, or a neighbouring CLI text.

Each positive row is the CLI's own wording (``shared/reference/brev-cli.md`` §2, §5, and the simulator in
``airflow_provider_brev/testing/fake_brev``) and matches exactly one marker of its rule, so dropping or
corrupting any one marker changes a verdict here. Near-misses classify as what they are: ``command not found``,
``file not found`` and ``path not found`` are a command's own failure, not a missing instance.
"""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.protocol.classify import (
    BREADCRUMB_PATTERNS,
    LOGGED_OUT_MARKERS,
    RULES,
    Marker,
    classify_failure,
    is_logged_out,
    is_startup_breadcrumb,
    last_error_text,
    login_failure,
    should_relogin,
    strip_breadcrumbs,
)
from airflow_provider_brev.exceptions import (
    BrevAuthError,
    BrevCLIError,
    BrevConnectionLostError,
    BrevDuplicateNameError,
    BrevError,
    BrevInstanceNotFoundError,
    BrevInstanceNotReadyError,
    BrevInvalidInputError,
    BrevNoCapacityError,
    BrevNoMatchingTypeError,
    BrevPlacementRequiredError,
    BrevTransientError,
    retry_policy,
)

API = "https://brevapi.us-west-2-prod.control-plane.brev.dev"
TRACE = "[error] \ngithub.com/brevdev/brev-cli/pkg/cmd/exec.runSSHWithTimeout\n/pkg/cmd/exec/exec.go:303\n: "

# (marker name, stdout, stderr, the verdict): the CLI's words for each marker, alone among its rule's markers.
POSITIVE: list[tuple[str, str, str, type[BrevError]]] = [
    ("login prompt", "You are currently logged out, would you like to log in? [Y/n]: ", "", BrevAuthError),
    (
        "401 from the API",
        "",
        f'{API}/api/me?utm_source=cli 401 Unauthorized {{"message":"invalid token"}}',
        BrevAuthError,
    ),
    (
        "403 from the API",
        "",
        f"{API}/api/organizations/o-1/workspaces?utm_source=cli 403 Forbidden {{}}",
        BrevAuthError,
    ),
    ("login declined", "", "declined to login\n", BrevAuthError),
    ("login timed out", "", "timed out waiting for login\n", BrevAuthError),
    ("unknown flag", "", "unknown flag: --yes\n", BrevInvalidInputError),
    ("unknown shorthand flag", "", "unknown shorthand flag: 'y' in -y\n", BrevInvalidInputError),
    ("unknown command", "", 'unknown command "orgs" for "brev"\n\nDid you mean this?\n\torg\n', BrevInvalidInputError),
    ("placement", "", "no placement is possible: the organization has 2 workspace groups", BrevPlacementRequiredError),
    ("placement", "", "Placement error: this organization has 2 workspace groups", BrevPlacementRequiredError),
    (
        "--cloud-cred-id",
        "",
        "this organization has 2 cloud credentials; pass --cloud-cred-id <id>",
        BrevPlacementRequiredError,
    ),
    ("--workspace-group-id", "", "pass --workspace-group-id <id> (see brev ls --json)", BrevPlacementRequiredError),
    ("duplicate workspace", "", "[Worker 1] g6e.xlarge Failed: duplicate workspace name\n", BrevDuplicateNameError),
    (
        "workspace already exists",
        "",
        "Error: workspace 'w-1' already exists. Use a different name or delete the existing workspace\n"
        "Warning: Only created 0/1 instances\ncould only create 0/1 instances\n",
        BrevDuplicateNameError,
    ),
    ("name is required", "", "name is required\n", BrevInvalidInputError),
    ("name too long", "", "name must be 63 characters or fewer (got 70)\n", BrevInvalidInputError),
    (
        "name characters",
        "",
        "name must start with a letter or digit and contain only letters, digits, hyphens, underscores, and dots\n",
        BrevInvalidInputError,
    ),
    (
        "instance name required",
        "",
        "instance name required: provide as argument or pipe from another command\n",
        BrevInvalidInputError,
    ),
    ("count at least 1", "", "--count must be at least 1\n", BrevInvalidInputError),
    ("command is required", "", "command is required\n", BrevInvalidInputError),
    (
        "no type matches",
        "",
        "no GPU instances match the specified filters. Try 'brev search' to see available options\n",
        BrevNoMatchingTypeError,
    ),
    (
        "not a recognized type",
        "",
        "instance type \"zz.large\" is not a recognized type; run 'brev search' to see available types\n",
        BrevNoMatchingTypeError,
    ),
    # "please retry" wins over "no capacity" in the same output
    (
        "please retry",
        "",
        "[Worker 1] g6e.xlarge Failed: no capacity right now, please retry\ncould only create 0/1 instances\n",
        BrevTransientError,
    ),
    (
        "listing unavailable",
        "",
        'could not resolve workspace group for "g6e.xlarge" (instance-type listing was unavailable)\n',
        BrevTransientError,
    ),
    ("5xx from the API", "", f"{API}/api/workspaces?utm_source=cli 503 Service Unavailable <html>", BrevTransientError),
    ("try again", "", "the server is busy, try again\n", BrevTransientError),
    ("try again", "", "Server busy. Try Again in a minute.\n", BrevTransientError),  # any case: a server's words
    ("connection reset", "", "read tcp 1.2.3.4:5->6.7.8.9:443: read: connection reset by peer\n", BrevTransientError),
    ("i/o timeout", "", f'Get "{API}/api/me": dial tcp 1.2.3.4:443: i/o timeout\n', BrevTransientError),
    ("TLS handshake timeout", "", f'Get "{API}/api/me": net/http: TLS handshake timeout\n', BrevTransientError),
    (
        "name resolution",
        "",
        "dial tcp: lookup brevapi on 127.0.0.53:53: Temporary failure in name resolution\n",
        BrevTransientError,
    ),
    ("no such host", "", "dial tcp: lookup brevapi.example: no such host\n", BrevTransientError),
    (
        "client timeout",
        "",
        f'Get "{API}/api/me": net/http: request canceled (Client.Timeout exceeded while awaiting headers)\n',
        BrevTransientError,
    ),
    ("truncated JSON", "", "unexpected end of JSON input\n", BrevTransientError),
    # a bare "no capacity", without create's "could only create 0/1" line
    (
        "no capacity",
        "",
        "[Worker 1] g6e.xlarge Failed: no capacity available for instance type g6e.xlarge\n",
        BrevNoCapacityError,
    ),
    ("created none", "", "Warning: Only created 0/1 instances\ncould only create 0/1 instances\n", BrevNoCapacityError),
    (
        "no such instance",
        "",
        "1 error occurred:\n\t* instance with id/name gone-1 not found\n\n",
        BrevInstanceNotFoundError,
    ),
    (
        "lookup failed",
        "",
        'Connection failed, checking instance status...\nssh connection failed and could not look up instance "w-1": '
        "exit status 255\nPlease check your instances with: brev ls\n",
        BrevInstanceNotFoundError,
    ),
    ("start: path not found", "", "tried to start with local path but path not found\n", BrevInstanceNotFoundError),
    (
        "in state",
        "",
        'Connection failed, checking instance status...\ninstance "w-1" is in state "DEPLOYING" — please check with: '
        "brev ls\n",
        BrevInstanceNotReadyError,
    ),
    (
        "could not connect",
        "",
        'could not connect to instance "w-1": \nPlease check with: brev ls\n',
        BrevConnectionLostError,
    ),
    ("ssh connect failed", "", "ssh: connect to host 1.2.3.4 port 22: Connection refused\n", BrevConnectionLostError),
    ("ssh connect failed", "", "ssh: connect to host 1.2.3.4 port 22: Connection timed out\n", BrevConnectionLostError),
    ("closed by remote host", "", "Connection to w-1 closed by remote host.\n", BrevConnectionLostError),
    ("exit status 255", "", TRACE + "exit status 255\n", BrevConnectionLostError),
    (
        "unresolvable alias",
        "",
        "ssh: Could not resolve hostname w-1: Name or service not known\n",
        BrevConnectionLostError,
    ),
]

# (marker name, stdout, stderr, the verdict): text that resembles the marker but means something else.
NEAR_MISS: list[tuple[str, str, str, type[BrevError]]] = [
    ("login prompt", "echo You are currently logged out, would you like to log in?\n", "oops\n", BrevCLIError),
    (
        "401 from the API",
        "",
        "curl: HTTP/1.1 401 Unauthorized from the job's own service\nexit status 22\n",
        BrevCLIError,
    ),
    # an expired presigned S3 URL is not an expired Brev session
    (
        "403 from the API",
        "",
        "upload: HTTP/1.1 403 Forbidden (the presigned URL expired)\nexit status 1\n",
        BrevCLIError,
    ),
    ("login declined", "", "the registry declined to login anonymously\nexit status 1\n", BrevCLIError),
    ("login timed out", "", "timed out waiting for instance to reach RUNNING state after 10m0s\n", BrevCLIError),
    ("unknown flag", "", 'warning: unknown flag "x" in the config file\nexit status 2\n', BrevCLIError),
    ("unknown shorthand flag", "", "unknown shorthand flag 'y'\nexit status 2\n", BrevCLIError),
    ("unknown command", "", 'unknown command "train" for "tao"\nexit status 1\n', BrevCLIError),
    ("placement", "", "disk displacement check failed\n", BrevCLIError),
    # the released CLI has no placement flags: that is a flag it does not know, not an account needing placement
    ("--cloud-cred-id", "", "unknown flag: --cloud-cred-id\n", BrevInvalidInputError),
    ("--workspace-group-id", "", "unknown flag: --workspace-group-id\n", BrevInvalidInputError),
    ("duplicate workspace", "", "duplicate key value violates unique constraint\n", BrevCLIError),
    ("workspace already exists", "", "error: file 'out.json' already exists\nexit status 1\n", BrevCLIError),
    ("name is required", "", "username is required\nexit status 1\n", BrevCLIError),
    ("name too long", "", "hostname must be 63 characters or fewer\n", BrevCLIError),
    ("name characters", "", "filename must start with a letter or digit\n", BrevCLIError),
    ("instance name required", "", "instance name required for this operation\n", BrevCLIError),
    ("count at least 1", "", "disk size must be at least 500 GB\n", BrevCLIError),
    ("command is required", "", "subcommand is required\n", BrevCLIError),
    ("no type matches", "", "no GPU instances match your quota\n", BrevCLIError),
    ("not a recognized type", "", 'value "abc" is not a recognized type\n', BrevCLIError),
    (
        "please retry",
        "",
        "[Worker 1] g6e.xlarge Failed: no capacity\nretrying the next type, please wait\ncould only create 0/1 instances\n",
        BrevNoCapacityError,
    ),
    ("listing unavailable", "", "Warning: could not fetch instance types with workspace groups\n", BrevCLIError),
    ("5xx from the API", "", "HTTP/1.1 503 Service Unavailable\nexit status 22\n", BrevCLIError),
    # the capacity message advises to try again: a capacity verdict, not a transient server error
    (
        "try again",
        "",
        'instance type "g6e.xlarge" is currently unavailable (no capacity); try again later or run '
        "'brev search' to find another type\n",
        BrevNoCapacityError,
    ),
    ("connection reset", "", "connection resets seen: 0\n", BrevCLIError),
    ("i/o timeout", "", "disk i/o error\nexit status 1\n", BrevCLIError),
    ("TLS handshake timeout", "", "TLS handshake failed: bad certificate\n", BrevCLIError),
    ("name resolution", "", "permanent failure in name lookup\n", BrevCLIError),
    ("no such host", "", "no such hostname in the inventory\n", BrevCLIError),
    ("client timeout", "", "Client.Timeout is set to 30s\n", BrevCLIError),
    ("truncated JSON", "", "unexpected end of file\n", BrevCLIError),
    ("no capacity", "", "no capacityReservation configured\n", BrevCLIError),
    ("created none", "", "could only create 1/2 instances\n", BrevCLIError),
    # a remote command that is missing, a missing file, a missing path: what they are, never a missing instance
    ("no such instance", "", "bash: line 1: trainer: command not found\nexit status 127\n", BrevCLIError),
    ("no such instance", "", "open /home/ubuntu/spec.yaml: file not found\n", BrevCLIError),
    ("lookup failed", "", "could not look up host brevapi\n", BrevCLIError),
    ("start: path not found", "", "remote path not found: ~/data\n", BrevCLIError),
    ("in state", "", 'job "train" is in state "running"\n', BrevCLIError),
    ("could not connect", "", "could not connect to the Docker daemon\nexit status 1\n", BrevCLIError),
    (
        "ssh connect failed",
        "",
        "curl: (7) Failed to connect to 10.0.0.5 port 8080: Connection refused\nexit status 7\n",
        BrevCLIError,
    ),
    ("closed by remote host", "", "Connection closed by the peer while reading\n", BrevCLIError),
    ("exit status 255", "", TRACE + "exit status 25\n", BrevCLIError),
    ("unresolvable alias", "", "fatal: Could not resolve host: github.com\nexit status 128\n", BrevCLIError),
]


def _markers() -> dict[str, tuple[Marker, tuple[Marker, ...]]]:
    """Every marker by name, with the markers of its own rule."""
    found = {m.name: (m, LOGGED_OUT_MARKERS) for m in LOGGED_OUT_MARKERS}
    for rule in RULES:
        for marker in rule.markers:
            found[marker.name] = (marker, rule.markers)
    return found


def test_every_marker_has_a_positive_and_a_near_miss_case():
    names = set(_markers())
    assert names == {row[0] for row in POSITIVE}
    assert names == {row[0] for row in NEAR_MISS}


@pytest.mark.parametrize(
    ("name", "stdout", "stderr", "expected"), POSITIVE, ids=[f"{r[0]}-{i}" for i, r in enumerate(POSITIVE)]
)
def test_each_cli_phrase_decides_its_verdict(name, stdout, stderr, expected):
    _marker, siblings = _markers()[name]
    text = f"{stdout}\n{stderr}"
    assert [m.name for m in siblings if m.found(text)] == [name]  # alone: this marker decides
    error = classify_failure("create", 1, stdout, stderr)
    assert type(error) is expected
    assert is_logged_out(stdout, stderr) is (expected is BrevAuthError)


@pytest.mark.parametrize(
    ("name", "stdout", "stderr", "expected"), NEAR_MISS, ids=[f"{r[0]}-{i}" for i, r in enumerate(NEAR_MISS)]
)
def test_a_near_miss_is_not_that_verdict(name, stdout, stderr, expected):
    error = classify_failure("exec", 1, stdout, stderr)
    assert type(error) is expected
    assert is_logged_out(stdout, stderr) is (expected is BrevAuthError)


@pytest.mark.parametrize(
    ("stderr", "expected"),
    [
        ("bash: line 1: trainer: command not found\nexit status 127", BrevCLIError),
        ("open spec.yaml: file not found", BrevCLIError),
        ("tried to start with local path but path not found", BrevInstanceNotFoundError),
    ],
    ids=["command-not-found", "file-not-found", "path-not-found"],
)
def test_not_found_texts_classify_as_what_they_are(stderr, expected):
    assert type(classify_failure("exec", 1, "", stderr)) is expected


def test_phrases_keep_the_clis_case():
    assert type(classify_failure("exec", 1, "", "ssh: could not resolve hostname w-1")) is BrevCLIError
    assert type(classify_failure("exec", 1, "", "EXIT STATUS 255")) is BrevCLIError
    assert (
        type(classify_failure("ls", 1, "", "you are currently logged out, would you like to log in?")) is BrevCLIError
    )


def test_only_eof_as_the_last_line_is_the_logged_out_prompt_answer():
    assert is_logged_out("", "EOF")
    assert is_logged_out("", "some noise\nEOF\n")
    assert not is_logged_out("", "EOF\nexit status 1")
    assert not is_logged_out("", "unexpected EOF")
    assert not is_logged_out("", "")


# Breadcrumbs: lines the CLI prints that are never an error (each pattern of BREADCRUMB_PATTERNS), and lines that
# only look like one and must reach the classifier.
BREADCRUMB_LINES = [
    ("no oauth found for token", "no oauth found for token: the store is empty"),
    ("WARN: malformed refresh token, logging out", "WARN: disk almost full"),
    ("warning: invalid refresh token | token expired", "warning: invalid spec file"),
    ("   ▸     Starting Login", "▸ Starting Login twice"),
    ("current organization: acme", "current organization is acme"),
    ("list your instances:", "list your instances: failed"),
    ("brev create my-instance", "brev delete my-instance"),
    ("💡 Detected an AI coding agent. Install the Brev skill", "Detected an AI coding agent"),
    ("👋 New to Brev? Start here", "New to Brev? Start here"),
    ("Agent pid 4242", "Agent pid abc"),
]


def test_every_breadcrumb_pattern_has_a_line_and_a_look_alike():
    for pattern in BREADCRUMB_PATTERNS:
        assert any(pattern.match(line.strip()) for line, _ in BREADCRUMB_LINES), pattern.pattern
        assert not any(pattern.match(other.strip()) for _, other in BREADCRUMB_LINES), pattern.pattern


@pytest.mark.parametrize(("crumb", "look_alike"), BREADCRUMB_LINES, ids=[c for c, _ in BREADCRUMB_LINES])
def test_breadcrumbs_are_stripped_and_look_alikes_are_kept(crumb, look_alike):
    assert strip_breadcrumbs(f"{crumb}\nreal error") == "real error"
    assert strip_breadcrumbs(f"{look_alike}\nreal error") == f"{look_alike}\nreal error"


def test_the_cli_message_is_the_stderr_tail_or_else_stdout():
    error = classify_failure("ls", 3, "no oauth found for token\nsomething on stdout\n", "")
    assert error.cli_message == "something on stdout"
    assert error.command == "ls"
    assert "`brev ls` failed with exit code 3" in str(error)
    only_stdout = classify_failure("ls", 1, "s" * 2500 + "END", "")
    assert only_stdout.cli_message == ("s" * 2500 + "END")[-2000:]
    long_error = classify_failure("ls", 1, "ignored", "x" * 2500 + "END")
    assert long_error.cli_message == ("x" * 2500 + "END")[-2000:]
    assert last_error_text("  " + "y" * 2000 + "  ") == "y" * 2000
    assert last_error_text("abc", limit=2) == "bc"
    assert strip_breadcrumbs("") == ""


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        # a server error during login is retried by the caller, not reported as a bad token
        ("", f"{API}/api/me?utm_source=cli 502 Bad Gateway <html>", BrevTransientError),
        ("", f"{API}/api/me?utm_source=cli 401 Unauthorized {{}}", BrevAuthError),
        ("", "api key must start with bak-", BrevAuthError),
        ("You are currently logged out, would you like to log in? [Y/n]: ", "EOF", BrevAuthError),
    ],
    ids=["5xx-stays-transient", "401-is-the-secret", "rejected-key", "logged-out"],
)
def test_a_failed_login_is_transient_only_for_server_trouble(stdout, stderr, expected):
    error = login_failure(1, stdout, stderr)
    assert type(error) is expected
    assert error.command == "login"
    if expected is BrevAuthError:
        assert "Brev rejected the login" in str(error)
        assert error.cli_message == (stderr or stdout).strip()


def test_a_failed_login_quotes_stdout_when_stderr_is_empty():
    error = login_failure(1, "no oauth found for token\ninvalid token\n", "")
    assert error.cli_message == "invalid token"


def test_logged_out_detection():
    assert is_logged_out("You are currently logged out, would you like to log in? [Y/n]: ", "EOF\n")
    assert is_logged_out("", "https://x/api/me?x 401 Unauthorized {}")
    # a breadcrumb is not a diagnosis: this session prints it on every call, logged in or not
    assert not is_logged_out("no oauth found for token\n", "something")
    assert not is_logged_out("fine", "unexpected EOF while reading")


@pytest.mark.parametrize(
    ("stderr", "error_type"),
    [
        ("EOF", BrevAuthError),
        ("unknown flag: --yes", BrevInvalidInputError),
        (
            "placement error: this organization has 2 cloud credentials; pass --cloud-cred-id",
            BrevPlacementRequiredError,
        ),
        (
            "Error: workspace 'x' already exists. Use a different name\ncould only create 0/1 instances",
            BrevDuplicateNameError,
        ),
        ("name must be 63 characters or fewer (got 70)", BrevInvalidInputError),
        ("no GPU instances match the specified filters. Try 'brev search'", BrevNoMatchingTypeError),
        ("instance type \"zz\" is not a recognized type; run 'brev search'", BrevNoMatchingTypeError),
        ("[Worker 1] g6e Failed: no capacity available\ncould only create 0/1 instances", BrevNoCapacityError),
        (
            'could not resolve workspace group for "X" (instance-type listing was unavailable); please retry',
            BrevTransientError,
        ),
        ("https://brevapi/api/x 502 Bad Gateway <html>", BrevTransientError),
        ("https://brevapi/api/x 500 Internal Server Error {}", BrevTransientError),
        ("1 error occurred:\n\t* instance with id/name ghost not found\n\n", BrevInstanceNotFoundError),
        ('ssh connection failed and could not look up instance "ghost": x\nPlease check', BrevInstanceNotFoundError),
        ('instance "x" is in state "DEPLOYING" — please check with: brev ls', BrevInstanceNotReadyError),
        (
            'could not connect to instance "x": \nssh: connect to host 1.2.3.4 port 22: Connection refused',
            BrevConnectionLostError,
        ),
        ("something nobody expected", BrevCLIError),
    ],
)
def test_classify_failure(stderr, error_type):
    error = classify_failure("create", 1, "", stderr)
    assert type(error) is error_type
    assert error.cli_message  # the CLI's own words travel with the error
    assert error.cli_message.splitlines()[-1].strip() in str(error)


def test_retry_policy_follows_the_type():
    assert retry_policy(classify_failure("ls", 1, "", "https://api/x 503 Service Unavailable y")) == "hook"
    assert retry_policy(classify_failure("ls", 1, "", "EOF")) != "hook"
    assert retry_policy(classify_failure("create", 1, "", "no GPU instances match the specified filters")) == "never"


@pytest.mark.parametrize(
    ("stderr", "message"),
    [
        ("instance with id/name x not found", "The Brev instance does not exist."),
        ('instance "x" is in state "STOPPING"', "The Brev instance is not running."),
        ("name is required", "`brev create` rejected its input."),
        ("please retry", "`brev create` hit a transient Brev error."),
        (
            "could only create 0/1 instances",
            "Brev had no capacity for any candidate instance type; try later or allow more types.",
        ),
    ],
)
def test_classified_errors_say_what_happened(stderr, message):
    assert classify_failure("create", 1, "", stderr).message == message


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

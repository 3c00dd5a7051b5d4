"""Checks of operator parameters, shared by every operator and sensor (pure: no Airflow, no I/O).

The rule (issue 11): every operator validates all its *rendered* parameters at the start of ``execute``, before
any ``brev`` call, so bad input costs nothing. Each check here returns the parsed value or raises
:class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` (an ``AirflowFailException``: no retry is spent)
whose message names the parameter, shows the value and says what to pass instead.

Templated parameters arrive as text (``"600"``, ``"true"``), or as ints under native rendering, so numbers and
booleans are parsed from strings too. Refused everywhere: garbage, NaN, infinities, and booleans posing as
numbers. *Empty* (``None``, ``""``, ``"None"``: what an unset template renders to) is handled explicitly:
:func:`optional` turns it into ``None`` for optional parameters, :func:`bool_value` into its ``default``;
a required parameter that is empty is an error.

Checks that already exist elsewhere in the pure core are reused, not repeated: instance names and owner prefixes
(:mod:`airflow_provider_brev.cli.names`), the gpu / instance type request shape
(:func:`airflow_provider_brev.cli.argv.instance_type_list`), bucket names
(:func:`airflow_provider_brev.cli.manifest.parse_s3_uri`); :func:`named` puts the parameter name into their
messages.
"""

from __future__ import annotations

import math
import numbers
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from airflow_provider_brev.cli.argv import instance_type_list
from airflow_provider_brev.cli.manifest import parse_s3_uri
from airflow_provider_brev.cli.names import validate_instance_name, validate_owner_prefix
from airflow_provider_brev.cli.transfer_paths import normalize_directory
from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

__all__ = [
    "MAX_DURATION_SECONDS",
    "bool_value",
    "choice",
    "conn_id",
    "directory",
    "duration_seconds",
    "env_mapping",
    "env_name",
    "exit_codes",
    "instance_name",
    "instance_request",
    "integer",
    "is_empty",
    "named",
    "non_negative",
    "optional",
    "owner_prefix",
    "placement_id",
    "positive_int",
    "positive_number",
    "regex",
    "s3_bucket",
    "s3_uri",
    "safe_text",
]

T = TypeVar("T")

#: Longest duration any parameter may ask for (10 years): longer than any run can sensibly wait, and short
#: enough that deadlines, ``timedelta`` values and the expiry in managed names stay representable.
MAX_DURATION_SECONDS = 10 * 365 * 24 * 3600.0
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_EMPTY = frozenset({"", "none"})
#: Airflow's own rule for connection ids (``airflow.models.connection.RE_SANITIZE_CONN_ID``, at most 250 chars).
_CONN_ID_RE = re.compile(r"^[\w#!()\-.:/\\]{1,250}$")
#: A placement id goes after ``--cloud-cred-id`` / ``--workspace-group-id``: one word, never flag-like.
_PLACEMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LINE_BREAKS = ("\x00", "\n", "\r")


def _fail(name: str, value: Any, expected: str) -> NoReturn:
    raise BrevInvalidInputError(f"{name} must be {expected}, got {value!r}.")


def is_empty(value: Any) -> bool:
    """Whether ``value`` means "not given": ``None``, ``""`` or ``"None"`` (an unset template's rendering)."""
    return value is None or (isinstance(value, str) and value.strip().lower() in _EMPTY)


def optional(check: Callable[..., T], name: str, value: Any, **limits: Any) -> T | None:
    """``None`` when ``value`` is empty (:func:`is_empty`), else ``check(name, value, **limits)``.

    :param check: one of this module's checks, e.g. :func:`positive_number`.
    :param name: the parameter's name.
    :param value: its rendered value.
    :param limits: keyword arguments of ``check``.
    """
    return None if is_empty(value) else check(name, value, **limits)


def named(name: str, check: Callable[[Any], T], value: Any) -> T:
    """Run an existing check that does not know the parameter's name, and put the name into its error.

    :param name: the parameter's name.
    :param check: a check raising :class:`BrevInvalidInputError` or ``ValueError``.
    :param value: the rendered value.
    """
    try:
        return check(value)
    except BrevInvalidInputError as err:
        if name in err.message:
            raise
        raise BrevInvalidInputError(f"{name}: {err.message}") from None
    except ValueError as err:
        raise BrevInvalidInputError(f"{name}: {err}") from None


# ----------------------------------------------------------------------------------------------------- numbers


def _finite(name: str, value: Any, expected: str) -> float:
    """A finite float from a number or numeric text; booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        _fail(name, value, expected)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        _fail(name, value, expected)
    if not math.isfinite(number):
        _fail(name, value, expected)
    return number


def _bounded(name: str, value: Any, number: float, expected: str, maximum: float | None) -> float:
    if maximum is not None and number > maximum:
        _fail(name, value, f"{expected} no greater than {maximum:.15g}")
    return number


def positive_number(name: str, value: Any, *, maximum: float | None = None, unit: str = "") -> float:
    """A finite number ``> 0`` (also from text such as ``"2.5"``).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param maximum: largest allowed value.
    :param unit: what the number counts (``"seconds"``, ``"GB"``), for the message.
    """
    expected = f"a positive number{' of ' + unit if unit else ''}"
    number = _finite(name, value, expected)
    if number <= 0:
        _fail(name, value, expected)
    return _bounded(name, value, number, expected, maximum)


def non_negative(name: str, value: Any, *, maximum: float | None = None, unit: str = "") -> float:
    """A finite number ``>= 0`` (also from text).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param maximum: largest allowed value.
    :param unit: what the number counts, for the message.
    """
    expected = f"a number >= 0{' of ' + unit if unit else ''}"
    number = _finite(name, value, expected)
    if number < 0:
        _fail(name, value, expected)
    return _bounded(name, value, number, expected, maximum)


def integer(name: str, value: Any, *, minimum: int, maximum: int | None = None) -> int:
    """A whole number ``>= minimum`` (``3``, ``3.0``, ``"3"``; not ``3.5``, ``"3.5"`` or ``True``).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param minimum: smallest allowed value.
    :param maximum: largest allowed value.
    """
    expected = f"a whole number >= {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
    number = _finite(name, value, expected)
    if not number.is_integer() or number < minimum or (maximum is not None and number > maximum):
        _fail(name, value, expected)
    return int(number)


def positive_int(name: str, value: Any, *, maximum: int | None = None) -> int:
    """A whole number ``>= 1`` (see :func:`integer`).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param maximum: largest allowed value.
    """
    return integer(name, value, minimum=1, maximum=maximum)


def duration_seconds(
    name: str, value: Any, *, allow_zero: bool = False, maximum: float = MAX_DURATION_SECONDS
) -> float:
    """A duration in seconds from a number, numeric text or a ``timedelta``; positive (or ``>= 0``).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param allow_zero: accept a zero duration.
    :param maximum: longest allowed duration in seconds (default :data:`MAX_DURATION_SECONDS`).
    """
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    check = non_negative if allow_zero else positive_number
    try:
        return check(name, seconds, maximum=maximum, unit="seconds (or a timedelta)")
    except BrevInvalidInputError:
        if seconds is value:
            raise
        _fail(name, value, f"a {'non-negative' if allow_zero else 'positive'} timedelta of at most {maximum:.15g} s")


# --------------------------------------------------------------------------------------------- words and text


def bool_value(name: str, value: Any, *, default: bool | None = None) -> bool:
    """A boolean from ``True``/``False``, ``0``/``1`` or text (``"true"``, ``"no"``, ``"On"`` ...).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param default: the value an empty parameter (:func:`is_empty`) means; without one, empty is an error.
    """
    if isinstance(value, bool):
        return value
    if is_empty(value) and default is not None:
        return default
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in _TRUE | _FALSE:
            return lowered in _TRUE
    _fail(name, value, "a boolean (true or false)")


def choice(name: str, value: Any, allowed: Collection[str]) -> str:
    """One of ``allowed`` (compared exactly, after stripping surrounding blanks).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param allowed: the accepted values.
    """
    text = value.strip() if isinstance(value, str) else value
    if text not in allowed:
        _fail(name, value, "one of " + ", ".join(map(repr, sorted(allowed))))
    return str(text)


def safe_text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    """Text without NUL or line breaks (it goes into a command line or a remote script); an int (native
    rendering of ``"{{ ds_nodash }}"``) becomes its text.

    :param name: the parameter's name.
    :param value: its rendered value.
    :param allow_empty: accept ``""`` (or blanks).
    """
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        _fail(name, value, "a non-empty string" if not allow_empty else "a string")
    if any(ch in value for ch in _LINE_BREAKS):
        _fail(name, value, "text without NUL characters or newlines")
    return value


def _matching(name: str, value: Any, pattern: re.Pattern[str], expected: str) -> str:
    text = safe_text(name, value)
    if not pattern.match(text):
        _fail(name, value, expected)
    return text


def conn_id(name: str, value: Any) -> str:
    """An Airflow connection id (Airflow's own rule: letters, digits, ``_#!().:/\\-``, at most 250 chars).

    :param name: the parameter's name (``brev_conn_id``, ``aws_conn_id`` ...).
    :param value: its rendered value.
    """
    return _matching(name, value, _CONN_ID_RE, "a connection id (letters, digits and _#!().:/\\- only)")


def placement_id(name: str, value: Any) -> str:
    """A placement id (``cloud_cred_id``, ``workspace_group_id``): one word that cannot pass for a flag.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    return _matching(name, value, _PLACEMENT_RE, "an id as `brev` lists it (starting with a letter or digit)")


def env_name(name: str, value: Any) -> str:
    """An environment variable name (letters, digits and ``_``, not starting with a digit).

    :param name: the parameter's name (e.g. ``"env key"``).
    :param value: the variable name.
    """
    return _matching(name, value, _ENV_NAME_RE, "an environment variable name such as MY_VAR")


def instance_name(name: str, value: Any) -> str:
    """A Brev instance name (:func:`airflow_provider_brev.cli.names.validate_instance_name`).

    :param name: the parameter's name.
    :param value: its rendered value (an int from native rendering becomes its text).
    """
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    return named(name, validate_instance_name, text)


def owner_prefix(name: str, value: Any) -> str:
    """An owner prefix of managed names (:func:`airflow_provider_brev.cli.names.validate_owner_prefix`).

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    return named(name, validate_owner_prefix, value)


def s3_bucket(name: str, value: Any) -> str:
    """An S3 bucket name (the rule of :func:`airflow_provider_brev.cli.manifest.parse_s3_uri`); surrounding blanks
    are dropped.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    bucket = safe_text(name, value).strip()
    if "/" in bucket:
        _fail(name, value, "a bucket name alone (the prefix goes into s3_prefix)")
    return named(name, lambda text: parse_s3_uri(f"s3://{text}/")[0], bucket)


def instance_request(gpu: Any, instance_types: Any) -> tuple[str | None, list[str] | None]:
    """The gpu / instance_types request, shape-checked by
    :func:`airflow_provider_brev.cli.argv.instance_type_list` (either one, never both); ``(None, None)`` when
    neither is given.

    :param gpu: ``"L40S:1"`` or empty.
    :param instance_types: a list, a comma-separated string, or empty.
    """
    if gpu is not None and not isinstance(gpu, str):
        _fail("gpu", gpu, "a GPU request such as 'L40S:1'")
    types: Sequence[str] | str | None = instance_types
    if types is not None and not isinstance(types, str | list | tuple):
        _fail("instance_types", types, "a list of instance types or a comma-separated string")
    try:
        return instance_type_list(gpu, types)
    except BrevInvalidInputError as err:
        if "gpu" in err.message or "instance_types" in err.message:
            raise
        raise BrevInvalidInputError(f"instance_types: {err.message}") from None


def env_mapping(name: str, value: Any) -> dict[str, str] | None:
    """Environment variables: a dict whose keys are variable names (:func:`env_name`) and whose values are text
    without NUL characters; ``None`` when empty. Messages name the key, never a value (it may be a secret).

    :param name: the parameter's name (``env``, ``secret_env`` ...).
    :param value: its rendered value.
    """
    if is_empty(value) or value == {}:
        return None
    if not isinstance(value, dict):
        raise BrevInvalidInputError(
            f"{name} must be a dict of environment variables ({{'NAME': 'value'}}), got a {type(value).__name__}."
        )
    result: dict[str, str] = {}
    for key, item in value.items():
        key_text = env_name(f"{name} key", key)
        text = str(item)
        if "\x00" in text:
            raise BrevInvalidInputError(f"{name}[{key_text!r}] must not contain NUL characters (value not shown).")
        result[key_text] = text
    return result


def exit_codes(name: str, value: Any) -> list[int]:
    """Exit codes ``0..255``: one code (a number or its text) or a list of them; ``[]`` when empty.

    :param name: the parameter's name (``skip_on_exit_code``).
    :param value: its rendered value.
    """
    if is_empty(value):
        return []
    items = value if isinstance(value, list | tuple | set | frozenset) else [value]
    return sorted({integer(name, item, minimum=0, maximum=255) for item in items})


def regex(name: str, value: Any) -> str:
    """A regular expression that compiles (Python ``re`` syntax).

    :param name: the parameter's name (``progress_regex``, ``checkpoint_regex`` ...).
    :param value: its rendered value.
    """
    text = safe_text(name, value)
    try:
        re.compile(text)
    except re.error as err:
        raise BrevInvalidInputError(f"{name} must be a valid regular expression, got {value!r}: {err}.") from None
    return text


def s3_uri(name: str, value: Any, *, object_key: bool = False) -> str:
    """An ``s3://bucket/key-or-prefix`` URI (the rule of :func:`airflow_provider_brev.cli.manifest.parse_s3_uri`).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param object_key: the URI must name an object (a non-empty key not ending in ``/``).
    """
    text = safe_text(name, value).strip()
    named(name, parse_s3_uri, text)
    key = text[len("s3://") :].partition("/")[2]
    if object_key and (not key or key.endswith("/")):
        _fail(name, value, "the URI of an S3 object, such as 's3://bucket/specs/train.yaml'")
    return text


def directory(name: str, value: Any) -> str:
    """A directory on the instance (:func:`airflow_provider_brev.cli.transfer_paths.normalize_directory`: relative to
    the remote home, ``~/...`` or absolute; no ``.``/``..`` component); returned as given.

    :param name: the parameter's name.
    :param value: its rendered value.
    """
    text = safe_text(name, value)
    named(name, normalize_directory, text)
    return text

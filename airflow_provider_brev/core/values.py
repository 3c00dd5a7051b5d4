"""Checks of rendered parameter values, shared by every operator, sensor and spec (pure: no Airflow, no I/O).

The rule: every operator validates all its *rendered* parameters at the start of ``execute``, before any ``brev``
call, so bad input costs nothing. Each check returns the parsed value or raises
:class:`~airflow_provider_brev.exceptions.BrevInvalidInputError` (an ``AirflowFailException``: no retry is spent)
whose message names the parameter, shows the value and says what to pass instead.

Templated parameters arrive as text (``"600"``, ``"true"``), or as ints under native rendering, so numbers and
booleans are parsed from strings too. Refused everywhere: garbage, NaN, infinities, and booleans posing as
numbers. *Empty* (``None``, ``""``, ``"None"``: what an unset template renders to) is handled explicitly:
:func:`optional` turns it into ``None`` for optional parameters, :func:`bool_value` into its ``default``;
a required parameter that is empty is an error. The checks of Brev's own words (instance names, S3 locations,
directories) are :mod:`airflow_provider_brev.core.validation`'s.
"""

from __future__ import annotations

import math
import numbers
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from airflow_provider_brev.exceptions import BrevInvalidInputError

if TYPE_CHECKING:
    from collections.abc import Callable, Collection

__all__ = [
    "MAX_DURATION_SECONDS",
    "bool_value",
    "choice",
    "conn_id",
    "duration_seconds",
    "env_mapping",
    "env_name",
    "exit_codes",
    "integer",
    "is_empty",
    "matching",
    "named",
    "non_negative",
    "optional",
    "positive_int",
    "positive_number",
    "refuse",
    "regex",
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


_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


_LINE_BREAKS = ("\x00", "\n", "\r")


def refuse(name: str, value: Any, expected: str) -> NoReturn:
    """Raise :class:`BrevInvalidInputError`: ``<name> must be <expected>, got <value>``."""
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


def _finite(name: str, value: Any, expected: str) -> float:
    """A finite float from a number or numeric text; booleans are not numbers."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real | str):
        refuse(name, value, expected)
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        refuse(name, value, expected)
    if not math.isfinite(number):
        refuse(name, value, expected)
    return number


def _bounded(name: str, value: Any, number: float, expected: str, maximum: float | None) -> float:
    if maximum is not None and number > maximum:
        refuse(name, value, f"{expected} no greater than {maximum:.15g}")
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
        refuse(name, value, expected)
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
        refuse(name, value, expected)
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
        refuse(name, value, expected)
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
        refuse(name, value, f"a {'non-negative' if allow_zero else 'positive'} timedelta of at most {maximum:.15g} s")


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
    refuse(name, value, "a boolean (true or false)")


def choice(name: str, value: Any, allowed: Collection[str]) -> str:
    """One of ``allowed`` (compared exactly, after stripping surrounding blanks).

    :param name: the parameter's name.
    :param value: its rendered value.
    :param allowed: the accepted values.
    """
    text = value.strip() if isinstance(value, str) else value
    if text not in allowed:
        refuse(name, value, "one of " + ", ".join(map(repr, sorted(allowed))))
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
        refuse(name, value, "a non-empty string" if not allow_empty else "a string")
    if any(ch in value for ch in _LINE_BREAKS):
        refuse(name, value, "text without NUL characters or newlines")
    return value


def matching(name: str, value: Any, pattern: re.Pattern[str], expected: str) -> str:
    """Text (:func:`safe_text`) that ``pattern`` matches, else :func:`refuse` with ``expected``."""
    text = safe_text(name, value)
    if not pattern.match(text):
        refuse(name, value, expected)
    return text


def conn_id(name: str, value: Any) -> str:
    """An Airflow connection id (Airflow's own rule: letters, digits, ``_#!().:/\\-``, at most 250 chars).

    :param name: the parameter's name (``brev_conn_id``, ``aws_conn_id`` ...).
    :param value: its rendered value.
    """
    return matching(name, value, _CONN_ID_RE, "a connection id (letters, digits and _#!().:/\\- only)")


def env_name(name: str, value: Any) -> str:
    """An environment variable name (letters, digits and ``_``, not starting with a digit).

    :param name: the parameter's name (e.g. ``"env key"``).
    :param value: the variable name.
    """
    return matching(name, value, _ENV_NAME_RE, "an environment variable name such as MY_VAR")


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

"""The connection's settings and the installed CLI's capabilities, as plain values (no Airflow, no I/O).

:class:`BrevConnectionConfig` is what :class:`~airflow_provider_brev.hooks.base.BrevBaseHook` reads from the
Airflow connection; :class:`BrevCapabilities` is what it learns once per process from ``brev --version`` and
``brev create --help``. Both are pure so the argv builders in :mod:`airflow_provider_brev.core.protocol.argv` can be tested
without a CLI.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_brev.core.protocol.names import DEFAULT_OWNER_PREFIX
from airflow_provider_brev.exceptions import BrevConfigurationError

#: The Airflow connection id every Brev hook, operator and sensor uses unless told otherwise.
DEFAULT_BREV_CONN_ID = "brev_default"

__all__ = ["BrevCapabilities", "BrevConnectionConfig", "login_args"]


@dataclass(frozen=True)
class BrevConnectionConfig:
    """Everything the hook reads from the Airflow connection (or ``BREV_API_TOKEN``).

    :param conn_id: the Airflow connection id (``None`` when the token came from the environment).
    :param token: console token (connection password or extra ``token``).
    :param api_key: API key (``bak-...``, extra ``api_key``; CLI v0.6.324+).
    :param org_id: org id for API-key login (extra ``org_id``).
    :param org: org name for ``--org`` (extra ``org``).
    :param cli_path: path of the ``brev`` executable (extra ``cli_path``).
    :param cloud_cred_id: default placement id (extra ``cloud_cred_id``).
    :param workspace_group_id: default placement id (extra ``workspace_group_id``).
    :param brev_home: HOME for the CLI's ``~/.brev`` (extra ``brev_home``).
    :param name_prefix: owner prefix of managed instance names (extra ``name_prefix``).
    """

    conn_id: str | None
    token: str | None = None
    api_key: str | None = None
    org_id: str | None = None
    org: str | None = None
    cli_path: str | None = None
    cloud_cred_id: str | None = None
    workspace_group_id: str | None = None
    brev_home: str | None = None
    name_prefix: str = DEFAULT_OWNER_PREFIX

    @property
    def secret_fingerprint(self) -> str:
        """A short hash of the secret in use (to tell sessions apart without keeping the secret)."""
        secret = self.api_key or self.token or ""
        return hashlib.sha256(secret.encode()).hexdigest()[:16] if secret else ""

    @classmethod
    def from_extras(cls, conn_id: str | None, password: str | None, extras: dict[str, Any]) -> BrevConnectionConfig:
        """Build the config from a connection's password and extras (``extra__brev__*`` forms accepted)."""

        def extra(key: str) -> str | None:
            value = extras.get(key, extras.get(f"extra__brev__{key}"))
            return str(value).strip() if value not in (None, "") else None

        return cls(
            conn_id=conn_id,
            token=(password or "").strip() or extra("token"),
            api_key=extra("api_key"),
            org_id=extra("org_id"),
            org=extra("org"),
            cli_path=extra("cli_path"),
            cloud_cred_id=extra("cloud_cred_id"),
            workspace_group_id=extra("workspace_group_id"),
            brev_home=extra("brev_home"),
            name_prefix=extra("name_prefix") or DEFAULT_OWNER_PREFIX,
        )

    def validate(self) -> BrevConnectionConfig:
        """Reject malformed API-key settings (before any ``brev`` call)."""
        if self.api_key and not self.api_key.startswith("bak-"):
            raise BrevConfigurationError("The Brev API key (extra 'api_key') must start with 'bak-'.")
        if self.api_key and not self.org_id:
            raise BrevConfigurationError("API-key login needs the org id: set the connection extra 'org_id'.")
        return self


def login_args(config: BrevConnectionConfig) -> list[str] | None:
    """The ``brev login`` arguments for ``config`` (``None``: no secret, rely on an existing session)."""
    if config.api_key:
        return ["login", "--api-key", config.api_key, "--org-id", str(config.org_id)]
    if config.token:
        return ["login", "--token", config.token]
    return None


@dataclass(frozen=True)
class BrevCapabilities:
    """What the installed CLI supports, learned once per process (``--version`` and ``create --help``).

    :param version: the parsed version, ``None`` if unknown.
    :param version_text: the version as printed.
    :param create_flags: the flags ``brev create --help`` lists.
    """

    version: tuple[int, int, int] | None
    version_text: str
    create_flags: frozenset[str] = field(default_factory=frozenset)

    @property
    def accepts_gpu_spec(self) -> bool:
        return "gpu" in self.create_flags

    @property
    def accepts_cloud_cred_id(self) -> bool:
        return "cloud-cred-id" in self.create_flags

    @property
    def accepts_workspace_group_id(self) -> bool:
        return "workspace-group-id" in self.create_flags

    @property
    def has_json_listing(self) -> bool:
        return self.version is None or self.version >= (0, 6, 317)

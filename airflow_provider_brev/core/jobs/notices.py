"""Known tool notices on a remote command's standard error that say nothing about the command, pure.

``docker login`` (the TAO step's ``prepare``, :mod:`airflow_provider_brev.steps.tao`) always writes a warning
that the registry password is stored unencrypted in ``~/.docker/config.json``, followed by a pointer to credential
helpers -- on every step, on every instance, though nothing is wrong. :class:`StderrNoticeFilter` drops exactly
that notice (its first line and the two follow-up lines docker prints after it, and the blank line that ends it)
from what :meth:`~airflow_provider_brev.hooks.brev.BrevHook.run_command` logs as remote stderr; every other line
passes, including a follow-up line that comes without the warning before it.
"""

from __future__ import annotations

import re

#: The first line of docker's notice: ``WARNING! Your password will be stored unencrypted in <path>.`` (docker
#: up to 24) or ``WARNING! Your credentials are stored unencrypted in '<path>'.`` (docker 25 and later).
DOCKER_UNENCRYPTED_WARNING = re.compile(
    r"^WARNING! Your (?:password will be stored|credentials are stored) unencrypted in \S.*$"
)
#: The lines docker prints after it: the advice and the documentation address (it moved between versions).
DOCKER_NOTICE_FOLLOW_UPS = (
    re.compile(r"^Configure a credential helper to remove this warning\. See$"),
    re.compile(r"^https://docs\.docker\.com/\S*(?:credential-store|credential-stores)\S*$"),
)


class StderrNoticeFilter:
    """Line by line: :meth:`keep` is ``False`` for the lines of docker's unencrypted-credentials notice only.

    One filter per command run (it remembers where in the notice it is).
    """

    def __init__(self) -> None:
        self._in_notice = False  # the notice's first line was the last line kept out
        self._follow = 0  # how many of its follow-up lines came since

    def keep(self, line: str) -> bool:
        """Whether ``line`` (without its newline) is to be logged."""
        text = line.rstrip()
        if DOCKER_UNENCRYPTED_WARNING.match(text):
            self._in_notice, self._follow = True, 0
            return False
        if self._in_notice:
            if self._follow < len(DOCKER_NOTICE_FOLLOW_UPS) and DOCKER_NOTICE_FOLLOW_UPS[self._follow].match(text):
                self._follow += 1
                return False
            self._in_notice = False
            if not text:  # the blank line that ends the notice
                return False
        return True


__all__ = ["DOCKER_NOTICE_FOLLOW_UPS", "DOCKER_UNENCRYPTED_WARNING", "StderrNoticeFilter"]

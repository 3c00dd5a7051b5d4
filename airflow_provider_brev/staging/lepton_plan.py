"""A Lepton step's S3 data: what its job downloads and where it may upload, as presigned requests.

The job gets no AWS credential. The worker lists every ``inputs`` prefix and presigns one ``GET`` per object
(:meth:`LeptonData.input_plan`), and presigns one ``POST`` policy per ``outputs`` directory that S3 honours only for
keys below that output's prefix (:meth:`LeptonData.output_plan`); both expire after ``url_expires_in``. They reach the
container in the job's plan, a workspace secret (:mod:`airflow_provider_brev.core.lepton.agent`), and appear in no log,
XCom value, exception or job spec. When the job ended, :meth:`LeptonData.output_report` lists what the outputs hold.
Directories are relative to the job's working directory (:func:`~airflow_provider_brev.core.lepton.agent.job_directory`).
``boto3`` and the Amazon provider are imported only when a plan is made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_brev.core.lepton.agent import job_directory
from airflow_provider_brev.core.staging.manifest import validate_inputs, validate_outputs
from airflow_provider_brev.staging.runner import StagingHooks
from airflow_provider_brev.staging.sync import check_locations

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from airflow_provider_brev.core.staging.types import StagingPair
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook

#: The longest a presigned request may live (SigV4: 7 days).
MAX_URL_SECONDS = 7 * 24 * 3600


def url_lifetime(*, queue_timeout: float | None, timeout: float | None) -> int:
    """Seconds the job's presigned requests must live: it may queue, then run (an hour of margin), within 7 days."""
    wait = queue_timeout if queue_timeout is not None else MAX_URL_SECONDS
    run = timeout if timeout is not None else MAX_URL_SECONDS
    return int(min(MAX_URL_SECONDS, wait + run + 3600))


class LeptonData:
    """One Lepton step's ``inputs`` and ``outputs`` (see the module docstring).

    :param inputs: S3 URI prefix -> directory below the job's working directory.
    :param outputs: directory below the job's working directory -> S3 URI prefix.
    :param aws_conn_id: the Amazon connection that lists and presigns (its keys never leave the worker).
    :param url_expires_in: lifetime of the presigned requests, in seconds.
    """

    def __init__(
        self,
        inputs: Mapping[str, str] | None,
        outputs: Mapping[str, str] | None,
        *,
        aws_conn_id: str | None,
        url_expires_in: int,
    ) -> None:
        self.inputs = validate_inputs(inputs)
        self.outputs = validate_outputs(outputs)
        self.aws_conn_id = aws_conn_id
        self.url_expires_in = int(url_expires_in)
        self._staging = StagingHooks(aws_conn_id, url_expires_in=self.url_expires_in)  # one S3Hook, built at use

    def output_map(self) -> dict[str, str]:
        """``{directory: uri}`` of the outputs (the step's XCom result)."""
        return {pair.directory: pair.uri for pair in self.outputs}

    def check_locations(self) -> None:
        """Before anything is submitted: every location can be listed with ``aws_conn_id``."""
        locations = [(p.bucket, p.prefix, "inputs") for p in self.inputs]
        locations += [(p.bucket, p.prefix, "outputs") for p in self.outputs]
        if locations:
            check_locations(locations, s3=self._staging)

    def input_plan(self) -> list[dict[str, Any]]:
        """One presigned ``GET`` per object below every input prefix: ``{"url", "path", "size"}``."""
        plan: list[dict[str, Any]] = []
        for pair in self.inputs:
            staging = self._staging(pair.bucket)
            for obj in staging.list_prefix(pair.prefix):
                relative = obj.key[len(pair.prefix) :]
                if not relative or relative.endswith("/"):
                    continue
                path = f"{job_directory('inputs', pair.directory)}/{relative}"
                plan.append({"url": staging.presign_get(obj.key), "path": path, "size": obj.size})
        return plan

    def output_plan(self) -> list[dict[str, Any]]:
        """One presigned ``POST`` policy per output, for keys below its prefix: ``{"dir", "prefix", "post"}``."""
        plan: list[dict[str, Any]] = []
        for pair in self.outputs:
            post = self._staging(pair.bucket).client.generate_presigned_post(
                Bucket=pair.bucket,
                Key=pair.prefix + "${filename}",
                Conditions=[["starts-with", "$key", pair.prefix]],
                ExpiresIn=self.url_expires_in,
            )
            plan.append(
                {"dir": pair.directory, "prefix": pair.prefix, "post": {"url": post["url"], "fields": post["fields"]}}
            )
        return plan

    def output_report(self) -> list[dict[str, Any]]:
        """What every output prefix holds now: ``{"uri", "directory", "objects", "bytes"}`` (no secret)."""
        return [_listed(pair, self._staging(pair.bucket)) for pair in self.outputs]


def newest_download(
    uri: str, directory: str, *, pick: Callable[[Iterable[str]], str | None], aws_conn_id: str | None
) -> dict[str, Any] | None:
    """The object ``pick`` chooses among those directly under the S3 prefix ``uri``, as a presigned download into
    ``directory`` (``{"url", "path", "size"}``), or ``None`` when it chooses none (TAO's resume point)."""
    from airflow_provider_brev.hooks.s3_staging import S3StagingHook  # boto3 and S3Hook: only when run

    (pair,) = validate_inputs({uri: directory})
    staging = S3StagingHook(bucket=pair.bucket, aws_conn_id=aws_conn_id, url_expires_in=MAX_URL_SECONDS)
    objects = {obj.key[len(pair.prefix) :]: obj for obj in staging.list_prefix(pair.prefix)}
    chosen = pick(name for name in objects if "/" not in name)
    if chosen is None:
        return None
    obj = objects[chosen]
    return {"url": staging.presign_get(obj.key), "path": f"{directory}/{chosen}", "size": obj.size}


def _listed(pair: StagingPair, staging: S3StagingHook) -> dict[str, Any]:
    objects = staging.list_prefix(pair.prefix)
    return {
        "uri": pair.uri,
        "directory": pair.directory,
        "objects": len(objects),
        "bytes": sum(obj.size for obj in objects),
    }

"""Provider metadata read by Airflow's provider discovery.

A plain dict literal with no imports: every Airflow component (scheduler, API server, triggerer, workers,
CLI) calls this function.
"""

from __future__ import annotations


def get_provider_info() -> dict:
    return {
        "package-name": "airflow-provider-brev",
        "name": "NVIDIA Brev",
        "description": "Run GPU work (NVIDIA TAO training, gap analysis, S3 data staging) on "
        "NVIDIA Brev instances as Airflow tasks, with cleanup that cannot be skipped.",
        "versions": ["0.1.0"],
        "integrations": [
            {
                "integration-name": "NVIDIA Brev",
                "external-doc-url": "https://docs.nvidia.com/brev/",
                "tags": ["software"],
            },
            {
                "integration-name": "NVIDIA DGX Cloud Lepton",
                "external-doc-url": "https://docs.nvidia.com/dgx-cloud/lepton/",
                "tags": ["software"],
            },
        ],
        "hooks": [
            {
                "integration-name": "NVIDIA Brev",
                "python-modules": [
                    "airflow_provider_brev.hooks.base",
                    "airflow_provider_brev.hooks.driver",
                    "airflow_provider_brev.hooks.instances",
                    "airflow_provider_brev.hooks.brev",
                    "airflow_provider_brev.hooks.connection_form",
                    "airflow_provider_brev.hooks.job_polls",
                    "airflow_provider_brev.hooks.listing",
                    "airflow_provider_brev.hooks.login",
                    "airflow_provider_brev.hooks.process",
                    "airflow_provider_brev.hooks.s3_staging",
                    "airflow_provider_brev.hooks.transcript",
                ],
            },
            {"integration-name": "NVIDIA DGX Cloud Lepton", "python-modules": ["airflow_provider_brev.hooks.lepton"]},
        ],
        "operators": [
            {
                "integration-name": "NVIDIA Brev",
                "python-modules": [
                    "airflow_provider_brev.operators.base",
                    "airflow_provider_brev.operators.brev",
                    "airflow_provider_brev.operators.exec",
                    "airflow_provider_brev.operators.janitor",
                    "airflow_provider_brev.operators.step",
                    "airflow_provider_brev.operators.tao",
                ],
            },
            {
                "integration-name": "NVIDIA DGX Cloud Lepton",
                "python-modules": ["airflow_provider_brev.operators.lepton"],
            },
        ],
        "sensors": [
            {
                "integration-name": "NVIDIA Brev",
                "python-modules": ["airflow_provider_brev.sensors.base", "airflow_provider_brev.sensors.brev"],
            }
        ],
        "triggers": [
            {
                "integration-name": "NVIDIA Brev",
                "python-modules": ["airflow_provider_brev.triggers.base", "airflow_provider_brev.triggers.brev"],
            },
            {
                "integration-name": "NVIDIA DGX Cloud Lepton",
                "python-modules": ["airflow_provider_brev.triggers.lepton"],
            },
        ],
        # One entry per direction (Airflow's providers check): both operators are in transfers.s3; their shared
        # base is listed under the integrations it joins, as the Amazon provider lists its AwsToAwsBaseOperator
        # under Amazon Web Services -> Amazon Web Services.
        "transfers": [
            {
                "source-integration-name": "Amazon Web Services",
                "target-integration-name": "NVIDIA Brev",
                "python-module": "airflow_provider_brev.transfers.base",
            },
            {
                "source-integration-name": "Amazon Simple Storage Service (S3)",
                "target-integration-name": "NVIDIA Brev",
                "python-module": "airflow_provider_brev.transfers.s3",
            },
            {
                "source-integration-name": "NVIDIA Brev",
                "target-integration-name": "Amazon Simple Storage Service (S3)",
                "python-module": "airflow_provider_brev.transfers.s3",
            },
        ],
        "connection-types": [
            {
                "connection-type": "brev",
                "hook-class-name": "airflow_provider_brev.hooks.brev.BrevHook",
                "hook-name": "NVIDIA Brev",
                "ui-field-behaviour": {
                    "hidden-fields": ["host", "schema", "port", "login"],
                    "relabeling": {"password": "Brev API token"},
                    "placeholders": {
                        "password": "token from https://brev.nvidia.com/settings/cli "
                        "(or leave empty and use an API key)",
                        "extra": '{"cli_path": "/usr/local/bin/brev"}',
                    },
                },
                "conn-fields": {
                    "api_key": {
                        "label": "API key",
                        "description": "Brev API key (bak-...), an alternative to the token that does "
                        "not expire hourly (brev CLI v0.6.324+). Needs the org id.",
                        "schema": {"type": ["string", "null"], "format": "password"},
                    },
                    "org_id": {
                        "label": "Org id",
                        "description": "Organization id for API-key login.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "org": {
                        "label": "Org name",
                        "description": "Organization to list instances in (brev ls --org).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "cli_path": {
                        "label": "brev CLI path",
                        "description": "Path of the brev executable on workers and triggerers "
                        "(default: BREV_CLI, then PATH).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "cloud_cred_id": {
                        "label": "Cloud credential id",
                        "description": "Placement: passed to brev create only where the CLI accepts it.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "workspace_group_id": {
                        "label": "Workspace group id",
                        "description": "Placement: passed to brev create only where the CLI accepts it.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "name_prefix": {
                        "label": "Instance name prefix",
                        "description": "Owner prefix of instance names this provider generates and the "
                        "janitor may delete (default afbrev).",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            },
            {
                "connection-type": "lepton",
                "hook-class-name": "airflow_provider_brev.hooks.lepton.LeptonHook",
                "hook-name": "NVIDIA DGX Cloud Lepton",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port"],
                    "relabeling": {"login": "Workspace id", "password": "Workspace token", "host": "Workspace API URL"},
                    "placeholders": {
                        "host": "(optional) https://gateway.dgxc-lepton.nvidia.com/api/v2/workspaces/<workspace id>",
                        "extra": '(optional) {"shape_prices": {"gpu.8xh100-sxm": 24.0, "cpu.small": 0.05}}',
                    },
                },
            },
        ],
        "extra-links": [],
        # `airflow brev instances|sweep` (Airflow 3.2+; older versions ignore the key)
        "cli": ["airflow_provider_brev.cli.definition.get_brev_cli_commands"],
        # the Brev page of the Airflow UI (Airflow 3.1+ serves it; 3.0 loads the plugin, which logs where it would be)
        "plugins": [{"name": "brev", "plugin-class": "airflow_provider_brev.ui.plugin.BrevPlugin"}],
        "config": {
            "brev": {
                "description": "Settings of the NVIDIA Brev provider.",
                "options": {
                    "deferral_settle_seconds": {
                        "description": "The least time, in seconds, between a Brev task's deferral and the "
                        "trigger event that resumes it. An event that comes back before the scheduler has "
                        "processed the worker's exit on defer() can make the scheduler fail the resumed try "
                        "(apache/airflow#72716); 0 turns the guard off.",
                        "version_added": "0.2.0",
                        "type": "float",
                        "example": "10",
                        "default": "10",
                    },
                    "ui_conn_id": {
                        "description": "The connection the Brev page of the Airflow UI lists the live instances "
                        "with (`brev ls`, run by the API server; read-only). Empty: the page shows what the "
                        "provider recorded, without the live state.",
                        "version_added": "0.2.0",
                        "type": "string",
                        "example": "brev_default",
                        "default": "brev_default",
                    },
                    "triggerer_max_processes": {
                        "description": "The most brev processes one triggerer's event loop runs at once, shared by "
                        "every Brev trigger in it (job followers of one instance share one poll besides); 0 removes "
                        "the cap. Each process is a brev CLI plus its ssh: about 30 MB on a real host.",
                        "version_added": "0.2.0",
                        "type": "integer",
                        "example": "16",
                        "default": "16",
                    },
                },
            }
        },
    }

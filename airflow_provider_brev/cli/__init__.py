"""The pure core: everything this provider decides about the ``brev`` CLI, with no I/O and no Airflow.

By topic, each a sub-package with its own import-linter contract (pyproject.toml), from the bottom up:

* :mod:`~airflow_provider_brev.cli.values` -- checks of rendered parameter values (numbers, booleans, text);
* :mod:`~airflow_provider_brev.cli.secrets` -- what printed-secret redaction hides, for every compute;
* :mod:`~airflow_provider_brev.cli.protocol` -- one ``brev`` call: its argv, the call protocol, what its output means
  (classification, listings, search), the connection's config, instance names;
* :mod:`~airflow_provider_brev.cli.instances` -- an instance's identity (its id), readiness and recovery;
* :mod:`~airflow_provider_brev.cli.jobs` -- detached remote jobs: handles, scripts, polls, following, which try's job
  a try follows, the foreground wrapper and its secret redaction filter;
* :mod:`~airflow_provider_brev.cli.transfer` -- S3 <-> instance transfers: paths, manifests, rounds, scripts,
  reports, S3 locations;
* :mod:`~airflow_provider_brev.cli.tao` -- NVIDIA TAO: its command, its report and verdict, checkpoints;
* :mod:`~airflow_provider_brev.cli.validation` -- the checks of parameters that name Brev's and S3's things.

The drivers that do the I/O are the hooks (:mod:`airflow_provider_brev.hooks`) and the triggers.
"""

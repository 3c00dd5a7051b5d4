"""The pure core: everything this provider decides about the ``brev`` CLI, with no I/O and no Airflow.

Argument builders (:mod:`~airflow_provider_brev.cli.argv`), output parsers (:mod:`~airflow_provider_brev.cli.output`),
failure classification and the re-login decision (:mod:`~airflow_provider_brev.cli.classify`), the protocol of one
call (:mod:`~airflow_provider_brev.cli.invocation`), readiness (:mod:`~airflow_provider_brev.cli.readiness`), and the
scripts this provider runs on instances (remote jobs, the exactly-once wrapper, transfers, TAO). The hooks perform the
I/O these functions ask for; import-linter (``make test``) keeps Airflow and the hooks out of this package.
"""

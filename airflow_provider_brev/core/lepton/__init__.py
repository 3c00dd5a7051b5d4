"""The pure rules of a step on DGX Cloud Lepton (a job-based compute: submit a container, follow its state and its
log, no instance): job names per try (:mod:`.names`), the job spec (:mod:`.spec`), what a job state means
(:mod:`.states`), what an API answer means (:mod:`.errors`), the job's own report (:mod:`.report`) and following a
job as one state machine (:mod:`.follower`). No I/O, no Airflow, no SDK: the hook
(:mod:`airflow_provider_brev.hooks.lepton`) talks to the API.
"""

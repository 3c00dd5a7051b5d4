"""The step engine: a GPU step run as explicit phases over a compute and a workload (the step service)."""

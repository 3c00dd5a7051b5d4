"""DAGs exercised by tests/integration/test_docker_workloads.py: commands that manage their own containers with
the instance's docker (names, labels, a cidfile, ``docker inspect`` for the exit code, ``docker stop`` on kill).

Go templates in a command are Jinja to Airflow: the commands sit in ``{% raw %}`` blocks.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG

from airflow_provider_brev.operators.brev import BrevExecOperator

START = datetime(2026, 1, 1)

MANAGED_CONTAINER = """{% raw %}set -eu
docker run --name trainer-1 --label team=vision --label run=r1 --cidfile trainer.cid -d -e MODE=test \
  --gpus all --shm-size 1g -v "$HOME/results:/results" -w /results acme/trainer:1.0 \
  bash -c 'echo "$MODE" > mode.txt; echo training; exec sleep 300'
test "$(docker inspect -f '{{.State.Status}}' trainer-1)" = running
test "$(docker inspect -f '{{.Id}}' trainer-1)" = "$(cat trainer.cid)"
test "$(docker inspect -f '{{index .Config.Labels "team"}}' trainer-1)" = vision
docker ps --filter label=team=vision --filter label=run=r1 --format '{{.Names}}' | grep -qx trainer-1
docker stop --time 5 trainer-1
echo "exit code: $(docker inspect -f '{{.State.ExitCode}}' trainer-1)"
docker logs trainer-1
docker rm -f trainer-1
test -z "$(docker ps -aq)"
{% endraw %}"""

#: a job that runs a container and stops it when the job is stopped (the trap of a well-behaved command)
GUARDED_CONTAINER = """{% raw %}trap 'docker stop --time 5 guarded-1; exit 143' TERM
docker run -d --name guarded-1 --label owner=airflow acme/trainer:1.0 sleep 300 > /dev/null
docker wait guarded-1 &
wait $!
{% endraw %}"""

with DAG(dag_id="docker_managed_container", schedule=None, start_date=START):
    BrevExecOperator(
        task_id="run",
        gpu="L40S:1",
        command=MANAGED_CONTAINER,
        poll_interval=0.2,
        ready_timeout=120,
    )

with DAG(dag_id="docker_guarded_container", schedule=None, start_date=START, params={"instance": "docker-box-1"}):
    BrevExecOperator(
        task_id="run",
        instance_name="{{ params.instance }}",
        command=GUARDED_CONTAINER,
        poll_interval=0.2,
    )

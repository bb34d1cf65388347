#!/usr/bin/env bash
# wait-healthy.sh PROJECT [TIMEOUT_SECONDS]: wait until every container of the
# compose project that has a healthcheck reports healthy. Fails early when a
# container exited with a non-zero code or is unhealthy past the timeout.
# Works with docker-compose 1.29 and Compose v2 (both label containers with
# com.docker.compose.project).
set -euo pipefail
project=${1:?project}
timeout=${2:-180}
deadline=$((SECONDS + timeout))
while :; do
  ids=$(docker ps -aq --filter "label=com.docker.compose.project=${project}")
  if [[ -z $ids ]]; then
    echo "wait-healthy: no containers for project ${project}" >&2
    exit 1
  fi
  pending=()
  # One line per container: service, state, exit code, health (or none).
  while read -r svc state code health; do
    if [[ $state == exited && $code != 0 ]]; then
      echo "wait-healthy: ${svc} exited with code ${code}" >&2
      exit 1
    fi
    if [[ $health != none && $health != healthy ]]; then
      pending+=("${svc}:${health}")
    fi
  done < <(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{.State.ExitCode}} {{if .Config.Healthcheck}}{{if .State.Health}}{{.State.Health.Status}}{{else}}not-started{{end}}{{else}}none{{end}}' $ids)
  if ((${#pending[@]} == 0)); then
    exit 0
  fi
  if ((SECONDS >= deadline)); then
    echo "wait-healthy: not healthy after ${timeout}s: ${pending[*]}" >&2
    exit 1
  fi
  sleep 1
done

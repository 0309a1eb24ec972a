"""deploy/ and docker-compose.yml stay in step with the settings (no Docker needed)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
import pytest
import yaml

from worker.connect.sentinel import parse_sentinel_url
from worker.secret import Secret
from worker.settings import Settings, load_settings, settings_variables

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
ENV_EXAMPLE = DEPLOY / "memq.env.example"
_VARIABLE_LINE = re.compile(r"^#?([A-Z][A-Z0-9_]*)=(.*)$")
_MEMQ = re.compile(r"^MEMQ_[A-Z0-9_]+$")
_SECRETS = {
    settings_variables()[f.name]
    for f in msgspec.structs.fields(Settings)
    if f.type == (Secret | None)
}


def _yaml_files() -> list[Path]:
    return [REPO / "docker-compose.yml", *sorted((DEPLOY / "k8s").glob("*.y*ml"))]


def _documents(path: Path) -> list[Any]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def _variables_set(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (name, value) a compose file or manifest sets: mapping keys, `name:`/`value:`
    pairs of a container's env list, and `NAME=value` strings."""
    if isinstance(node, dict):
        name = node.get("name")
        if isinstance(name, str) and _MEMQ.match(name) and ("value" in node or "valueFrom" in node):
            yield name, node.get("value")
        for key, value in node.items():
            if isinstance(key, str) and _MEMQ.match(key):
                yield key, value
            yield from _variables_set(value)
    elif isinstance(node, list):
        for item in node:
            yield from _variables_set(item)
    elif isinstance(node, str) and "=" in node and _MEMQ.match(node.split("=", 1)[0]):
        yield node.split("=", 1)[0], node.split("=", 1)[1]


def _unit_variables(path: Path) -> Iterator[tuple[str, str]]:
    for line in path.read_text().splitlines():
        if line.startswith("Environment="):
            name, _, value = line.removeprefix("Environment=").partition("=")
            yield name, value


def _env_example() -> list[tuple[str, str, int]]:
    lines = ENV_EXAMPLE.read_text().splitlines()
    found = []
    for n, line in enumerate(lines):
        match = _VARIABLE_LINE.match(line)
        if match:
            found.append((match.group(1), match.group(2), n))
    return found


def _deploy_sources() -> list[tuple[str, list[tuple[str, Any]]]]:
    sources: list[tuple[str, list[tuple[str, Any]]]] = [
        (path.name, [pair for doc in _documents(path) for pair in _variables_set(doc)])
        for path in _yaml_files()
    ]
    sources += [
        (unit.name, list(_unit_variables(unit)))
        for unit in sorted((DEPLOY / "systemd").glob("*.service"))
    ]
    return sources


SOURCES = _deploy_sources()


@pytest.mark.parametrize(("source", "pairs"), SOURCES, ids=[source for source, _ in SOURCES])
def test_every_memq_variable_the_deploy_files_set_is_a_setting(
    source: str, pairs: list[tuple[str, Any]]
) -> None:
    known = set(settings_variables().values())
    unknown = sorted({name for name, _ in pairs} - known)
    assert not unknown, f"{source} sets {unknown}, which memq does not read"
    # The values they set must load, as memq itself would read them.
    values = {name: str(value) for name, value in pairs if value is not None}
    load_settings(values)


# What tests/fleet/ runs a fleet with: Redis behind Sentinel, PostgreSQL, a Chroma server.
FLEET_SETTINGS = (
    "MEMQ_REDIS_URL",
    "MEMQ_DATABASE_URL",
    "MEMQ_CHROMA",
    "MEMQ_PUBLISH_WAIT_REPLICAS",
)
_INTERPOLATED = re.compile(r"\$\{[^}]*\}")
_MONITOR = re.compile(r"sentinel monitor (\S+) (\S+) (\d+) (\d+)")


def _compose_services() -> dict[str, Any]:
    (compose,) = _documents(REPO / "docker-compose.yml")
    services: dict[str, Any] = compose["services"]
    return services


def _command(service: dict[str, Any]) -> str:
    command = service.get("command", [])
    return command if isinstance(command, str) else " ".join(map(str, command))


def test_the_settings_the_fleet_harness_proved_are_settings() -> None:
    assert set(FLEET_SETTINGS) <= set(settings_variables().values())


def test_compose_runs_the_fleet_topology_the_fault_tests_run() -> None:
    services = _compose_services()
    assert "--appendonly yes" in _command(services["redis-primary"])
    replicas = [
        n for n, svc in services.items() if "--replicaof redis-primary 6379" in _command(svc)
    ]
    sentinels = sorted(name for name, svc in services.items() if "--sentinel" in _command(svc))
    assert len(sentinels) == 3
    monitors = {_MONITOR.search(_command(services[name])) for name in sentinels}
    (monitor,) = {m.groups() if m else None for m in monitors}
    assert monitor is not None, "a sentinel monitors no master"
    master, host, port, quorum = monitor
    assert (host, port) == ("redis-primary", "6379")
    assert int(quorum) == 2  # a majority of the three
    assert "postgres" in services["postgres"]["image"]
    assert "profiles" not in services["postgres"], "PostgreSQL is the fleet's store, always on"
    chroma_args = services["chroma"]["entrypoint"]
    assert chroma_args[:2] == ["chroma", "run"]
    chroma_port = int(chroma_args[chroma_args.index("--port") + 1])
    for name in ("worker", "ui", "telegram"):
        env = services[name]["environment"]
        assert set(FLEET_SETTINGS) <= set(env), name
        redis = parse_sentinel_url(env["MEMQ_REDIS_URL"])
        assert sorted(h for h, _ in redis.sentinels) == sentinels
        assert {p for _, p in redis.sentinels} == {26379}
        assert redis.master == master
        # Compose fills in ${POSTGRES_PASSWORD…} from the shell or .env before memq sees it.
        database = urlsplit(_INTERPOLATED.sub("password", env["MEMQ_DATABASE_URL"]))
        assert (database.scheme, database.hostname) == ("postgresql", "postgres")
        chroma = urlsplit(env["MEMQ_CHROMA"])
        assert (chroma.scheme, chroma.hostname, chroma.port) == ("http", "chroma", chroma_port)
        # Each publish waits for a replica: a failover must leave the new primary one.
        wait = int(env["MEMQ_PUBLISH_WAIT_REPLICAS"])
        assert 1 <= wait <= len(replicas) - 1, (wait, replicas)


def test_k8s_points_the_workers_at_sentinel_postgresql_and_chroma_services() -> None:
    docs = [doc for path in _yaml_files()[1:] for doc in _documents(path)]
    services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    (config,) = [d for d in docs if d["kind"] == "ConfigMap"]
    redis = parse_sentinel_url(config["data"]["MEMQ_REDIS_URL"])
    assert {h for h, _ in redis.sentinels} <= services
    assert urlsplit(config["data"]["MEMQ_CHROMA"]).hostname in services
    assert "postgres" in services
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container.get("env", [])}
    # The database URL carries a password: the Secret names it, never the ConfigMap.
    assert "MEMQ_DATABASE_URL" not in config["data"]
    secret = env["MEMQ_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "memq-secrets", "key": "MEMQ_DATABASE_URL"}
    assert set(FLEET_SETTINGS) <= {*config["data"], *env}
    assert int(config["data"]["MEMQ_PUBLISH_WAIT_REPLICAS"]) >= 1


def test_the_deploy_files_set_no_secret_inline() -> None:
    for source, pairs in SOURCES:
        inline = sorted(name for name, value in pairs if name in _SECRETS and value)
        assert not inline, f"{source} sets {inline} inline: secrets come from an env file"


def test_compose_scales_the_worker_and_probes_its_health() -> None:
    (compose,) = _documents(REPO / "docker-compose.yml")
    services = compose["services"]
    assert {"redis-primary", "chroma", "worker", "ui", "telegram", "postgres"} <= set(services)
    worker = services["worker"]
    # --scale worker=N: no fixed container name, no host port
    assert "container_name" not in worker
    assert "ports" not in worker
    assert worker["command"][:3] == ["worker", "--metrics-port", "9090"]
    assert "/readyz" in " ".join(worker["healthcheck"]["test"])
    assert "--appendonly" in services["redis-primary"]["command"]
    for name in ("worker", "ui", "telegram"):
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile"


def test_k8s_worker_probes_readyz_and_healthz_on_the_metrics_port() -> None:
    docs = [doc for path in _yaml_files()[1:] for doc in _documents(path)]
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    port = int(args[args.index("--metrics-port") + 1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        assert ports[container[probe]["httpGet"]["port"]] == port
    (hpa,) = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    metric_names = [m["external"]["metric"]["name"] for m in hpa["spec"]["metrics"]]
    assert metric_names == ["memq_stream_pending"]
    services = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    assert {"redis-sentinel", "postgres", "chroma"} <= services


def test_env_example_lists_exactly_the_settings_each_with_a_comment() -> None:
    found = _env_example()
    names = [name for name, _, _ in found]
    assert sorted(names) == sorted(settings_variables().values())
    assert len(names) == len(set(names)), "a variable is listed twice"
    lines = ENV_EXAMPLE.read_text().splitlines()
    for name, _, n in found:
        assert n > 0
        assert lines[n - 1].startswith("# "), f"{name} has no comment line above it"


def test_env_example_holds_no_secret_and_its_examples_are_valid() -> None:
    found = _env_example()
    for name, value, _ in found:
        if name in _SECRETS:
            assert value == "", f"{name} has a value in the example"
    load_settings({name: value for name, value, _ in found if value})


def test_systemd_worker_unit_takes_its_metrics_port_from_the_instance() -> None:
    unit = (DEPLOY / "systemd" / "memq-worker@.service").read_text()
    (exec_start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    assert exec_start.endswith("memq worker --metrics-port %i")
    for name in ("memq-ui.service", "memq-telegram.service"):
        assert (DEPLOY / "systemd" / name).is_file()


def test_systemd_units_that_serve_http_raise_the_open_file_limit_above_the_agent_cap() -> None:
    # memq agent keeps at most half the soft limit open (worker/http_connections.py): at the
    # default 1,024 it would refuse past 512, below MEMQ_AGENT_MAX_CONNECTIONS' default.
    for name in ("memq-agent.service", "memq-ui.service", "memq-worker@.service"):
        unit = (DEPLOY / "systemd" / name).read_text()
        (limit,) = [line for line in unit.splitlines() if line.startswith("LimitNOFILE=")]
        assert int(limit.removeprefix("LimitNOFILE=")) >= 2 * Settings().agent_max_connections

"""A private PostgreSQL cluster (initdb + pg_ctl) on a free loopback port, never the shared 5432."""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.ports import free_port
from worker.storage.postgres.schema import SCHEMA_VERSION

MISSING = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found on the PATH nor under"
    " /usr/lib/postgresql/*/bin: scripts/test installs Debian's `postgresql` package"
    " (apt-get install postgresql)"
)
_USER = "memq"
_SCRATCH = "memq_scratch"
_DB_COUNTER = itertools.count(1)


def _bin_dir() -> Path | None:
    initdb = shutil.which("initdb")
    if initdb is not None and shutil.which("pg_ctl") is not None:
        return Path(os.path.realpath(initdb)).parent
    # Debian keeps the server binaries off the PATH, one directory per major version.
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


class PostgresServer:
    """Creates, starts and stops one throwaway cluster; trust auth for user `memq`."""

    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError(MISSING)
        self.bin_dir = bin_dir
        self.port = free_port()
        # Not under pytest's tmp dir: when run as root the server runs as `postgres`,
        # which must be able to reach its data directory.
        self.workdir = Path(tempfile.mkdtemp(prefix="memq-pg-"))
        self.datadir = self.workdir / "data"
        self._run_as: list[str] = []
        if os.geteuid() == 0:
            # initdb refuses to run as root: run the cluster as the package's `postgres` user.
            try:
                shutil.chown(self.workdir, "postgres", "postgres")
            except LookupError as e:
                shutil.rmtree(self.workdir, ignore_errors=True)
                raise RuntimeError(
                    "tests run as root and there is no `postgres` user to run the cluster as:"
                    " install Debian's `postgresql` package (it creates the user)"
                ) from e
            self._run_as = ["runuser", "-u", "postgres", "--"]

    @property
    def admin_url(self) -> str:
        return self.url("postgres")

    def url(self, database: str) -> str:
        return f"postgresql://{_USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        self._run(
            "initdb", "-D", str(self.datadir), "-U", _USER, "--auth=trust",
            "-E", "UTF8", "--no-locale", "--no-sync",
        )  # fmt: skip
        self.resume()
        return self

    def halt(self, mode: str = "fast") -> None:
        """Stop the server and keep its data (`pg_ctl stop -m fast`: clients are cut off);
        resume() starts it again on the same port."""
        self._run("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop")

    def resume(self) -> None:
        """Start the cluster initdb made (again), and wait until it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port}"
            f" -c unix_socket_directories={self.workdir}"
            " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            " -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.datadir), "-l", str(self.workdir / "postgres.log"),
            "-o", options, "-w", "-t", "30", "start",
        )  # fmt: skip

    def stop(self) -> None:
        if (self.datadir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.datadir), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.workdir, ignore_errors=True)

    async def create_database(self) -> str:
        """A new empty database; its URL."""
        name = f"memq_test_{os.getpid()}_{next(_DB_COUNTER)}"
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url(name)

    async def emptied_database(self) -> str:
        """The shared scratch database with every memq row deleted and ids restarted.

        Much faster than a new database per test; tests of migrating an empty database
        use create_database instead.
        """
        url = self.url(_SCRATCH)
        conn = await asyncpg.connect(self.admin_url)
        try:
            exists = await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", _SCRATCH)
            if not exists:
                await conn.execute(f'CREATE DATABASE "{_SCRATCH}"')
        finally:
            await conn.close()
        conn = await asyncpg.connect(url)
        try:
            tables = [
                f'"{name}"'
                for (name,) in await conn.fetch(
                    "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
                    " AND tablename <> 'memq_schema_version'"
                )
            ]
            if tables:
                await conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
            # A test may have pretended a newer memq migrated the database.
            if await conn.fetchval("SELECT to_regclass('memq_schema_version') IS NOT NULL"):
                await conn.execute(
                    "DELETE FROM memq_schema_version WHERE version > $1", SCHEMA_VERSION
                )
        finally:
            await conn.close()
        return url

    async def drop_database(self, url: str) -> None:
        """Drop a database create_database made (closing what still uses it)."""
        name = url.rsplit("/", 1)[1]
        conn = await asyncpg.connect(self.admin_url)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    def _run(self, program: str, *args: str) -> None:
        command = [*self._run_as, str(self.bin_dir / program), *args]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            log = self.workdir / "postgres.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{program} failed ({done.returncode}): {done.stderr.strip()[-2000:]} {tail}"
            )


_shared: PostgresServer | None = None
_users = 0


@pytest.fixture(name="postgres_server", scope="session")
def postgres_server_fixture() -> Iterator[PostgresServer]:
    """One cluster for the whole run, shared by every module that imports this fixture.

    A missing server binary fails the test (never skips it): the test command installs it.
    """
    global _shared, _users
    if _shared is None:
        try:
            server = PostgresServer()
        except RuntimeError as e:
            pytest.fail(str(e))
        try:
            server.start()
        except RuntimeError as e:
            server.stop()
            pytest.fail(f"cannot start a private PostgreSQL cluster: {e}")
        _shared = server
    _users += 1
    yield _shared
    _users -= 1
    if _users == 0:
        _shared.stop()
        _shared = None

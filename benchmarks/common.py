"""What the benchmarks share: the databases they make, the source they generate, the app's
changes, and the way they run the real ``dagster`` CLI.

Not a benchmark itself; each script imports it from this folder.
"""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa  # noqa: E402

from pipeline_assets import demo  # noqa: E402
from pipeline_assets.core.db.engines import make_engine
from pipeline_assets.core.secrets import redact
from pipeline_assets.core.times import UTC, to_instant  # noqa: E402

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
DAYS = 60  # the generated source's orders are stamped over this many days


class SqliteBackend:
    """Databases as SQLite files in one folder."""

    name = "sqlite"
    marker = "?"

    def __init__(self, folder: Path):
        self.folder = folder

    def new_url(self, label: str) -> str:
        """A new empty database (an existing one under the label is removed)."""
        path = self.folder / f"{label}.db"
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"

    def raw_connect(self, url: str):
        conn = sqlite3.connect(sa.make_url(url).database)
        conn.execute("PRAGMA journal_mode = WAL")  # as the warehouse engine sets it
        return conn

    def close(self) -> None:
        pass


class PostgresBackend:
    """Databases on a PostgreSQL server, made through an admin URL, dropped at the end."""

    name = "postgresql"
    marker = "%s"

    def __init__(self, admin_url: str):
        self.admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        self.names: list[str] = []
        self.by_label: dict[str, str] = {}

    def new_url(self, label: str) -> str:
        """A new empty database (an existing one under the label is dropped)."""
        if label in self.by_label:
            self._drop([self.by_label.pop(label)])
        name = f"pa_bench_{label}_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        self.by_label[label] = name
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def raw_connect(self, url: str):
        import psycopg

        return psycopg.connect(
            sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        )

    def _drop(self, names: list[str]) -> None:
        with self.admin.connect() as conn:
            for name in names:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names = [n for n in self.names if n not in names]

    def close(self) -> None:
        self._drop(list(self.names))
        self.admin.dispose()


class MysqlBackend(PostgresBackend):
    """Source databases on a MySQL or MariaDB server (the warehouse stays elsewhere)."""

    name = "mariadb"

    def new_url(self, label: str) -> str:
        if label in self.by_label:
            self._drop([self.by_label.pop(label)])
        name = f"pa_bench_{label}_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        self.names.append(name)
        self.by_label[label] = name
        return self.admin.url.set(database=name).render_as_string(hide_password=False)

    def _drop(self, names: list[str]) -> None:
        with self.admin.connect() as conn:
            for name in names:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
        self.names = [n for n in self.names if n not in names]


def backend_for(folder: Path, postgres_url: str | None):
    return PostgresBackend(postgres_url) if postgres_url else SqliteBackend(folder)


def add_postgres_options(parser, what: str) -> None:
    parser.add_argument(
        "--postgres",
        metavar="ADMIN_URL",
        help=f"{what} on this PostgreSQL server, in throw-away databases made through this URL",
    )
    parser.add_argument(
        "--postgres-if-reachable",
        metavar="ADMIN_URL",
        help="as --postgres, but only say so and go on (on SQLite) when no server answers there",
    )


def postgres_url(args) -> str | None:
    """``--postgres``, or ``--postgres-if-reachable`` when a server answers there."""
    if args.postgres or not args.postgres_if_reachable:
        return args.postgres
    try:
        probe = sa.create_engine(args.postgres_if_reachable, connect_args={"connect_timeout": 3})
        with probe.connect():
            pass
        probe.dispose()
        return args.postgres_if_reachable
    except Exception as exc:  # no server, no driver: the SQLite part still runs
        print(
            f"PostgreSQL at {redact(args.postgres_if_reachable)} not reachable "
            f"({type(exc).__name__}): its part is skipped"
        )
        return None


def build_source(url: str, n: int, *, seed: int = 1) -> dict:
    """The demo app database with ``n`` generated orders over :data:`DAYS` days."""
    engine = make_engine(url, role="app")
    try:
        demo.init(engine)
        return demo.generate(engine, orders=n, days=DAYS, seed=seed)
    finally:
        engine.dispose()


def change_some(
    url: str, count: int, *, seed: int = 2, status: str = "refunded", amount: str = "1.00"
) -> int:
    """As the app would: ``count`` orders picked at random over the whole history (so
    their old days spread over every day) set to ``status``/``amount``, stamped one second
    apart just after the newest row."""
    engine = make_engine(url, role="app")
    marker = "?" if engine.dialect.name == "sqlite" else "%s"
    try:
        with engine.begin() as conn:
            ids = [r[0] for r in conn.exec_driver_sql("SELECT order_id FROM orders")]
            newest = to_instant(
                conn.exec_driver_sql("SELECT max(updated_at) FROM orders").scalar(), UTC
            )
            picked = sorted(random.Random(seed).sample(ids, max(1, min(count, len(ids)))))
            conn.exec_driver_sql(
                f"UPDATE orders SET status = {marker}, amount = {marker}, "
                f"updated_at = {marker} WHERE order_id = {marker}",
                [
                    (
                        status,
                        amount,
                        (newest + timedelta(seconds=i + 1)).isoformat(timespec="seconds"),
                        oid,
                    )
                    for i, oid in enumerate(picked)
                ],
            )
        return len(picked)
    finally:
        engine.dispose()


def materialize(env: dict, cwd: Path, *target: str) -> float:
    """Seconds of one whole ``dagster asset materialize …`` (a fresh process)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "dagster"), "asset", "materialize", *target],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(
            f"dagster asset materialize {' '.join(target)} failed:\n{proc.stderr[-3000:]}"
        )
    return seconds


OURS = ("-m", "pipeline_assets.definitions", "--select", "orders")
TRIVIAL = ("-f", str(HERE / "trivial_location.py"), "--select", "trivial")
TRIVIAL_SEPARATE = ("-f", str(HERE / "trivial_location.py"), "--select", "trivial_separate")


def workdir_for(args, prefix: str) -> Path:
    """A new folder for one run of a benchmark: under ``--workdir`` (kept), or a temporary
    one (the caller removes it unless ``--workdir`` was given)."""
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=args.workdir))
    return Path(tempfile.mkdtemp(prefix=prefix))


def dagster_home(folder: Path) -> Path:
    """A Dagster home for CLI runs, telemetry off."""
    home = folder / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return home

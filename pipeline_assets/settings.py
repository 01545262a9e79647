"""The one place that reads the environment (the variables are listed in docs/contract.md);
everything below gets plain values."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from pipeline_assets.core.daily_files import is_url
from pipeline_assets.core.errors import TimeValueError
from pipeline_assets.core.times import parse_day, zone

from .core.broker import DEFAULT_BACKEND_URL, DEFAULT_BROKER_URL
from .core.errors import SettingsError

DEFAULTS = {
    "LOOKBACK_DAYS": "2",
    "PARTITIONS_START_DATE": "2026-01-01",
    "PIPELINE_TIMEZONE": "UTC",
    "RECONCILE_DAYS": "7",
    "MAX_DELETE_SHARE": "0.5",
    "PIPELINE_EXECUTOR": "default",
    "CELERY_BROKER_URL": DEFAULT_BROKER_URL,
    "CELERY_BACKEND_URL": DEFAULT_BACKEND_URL,
}
# default: Dagster's own (each step a process of the run's machine); celery: each step a
# task on the Celery broker, run by the workers of deploy/celery-worker.sh
EXECUTORS = ("default", "in_process", "celery")


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    source_url: str
    warehouse_url: str
    lookback_days: int
    partitions_start: date
    timezone: str
    # Whether a URL came from the environment: then Dagster is told the variable's name
    # (EnvVar) instead of its value, so a password never shows in the UI.
    source_url_from_env: bool = False
    warehouse_url_from_env: bool = False
    # PIPELINE_AUTOMATION=off starts the schedule and sensors stopped (default: running)
    automation: bool = True
    # how many days back the orders_match_source check compares source and warehouse
    reconcile_days: int = 7
    # where the paid_orders folder lives: a local path or an fsspec URL (s3://bucket/prefix);
    # empty means <data_dir>/paid_orders
    paid_orders_url: str = ""
    # a range load refuses to delete more than this share of the warehouse rows in its range
    max_delete_share: float = 0.5
    # PIPELINE_EXECUTOR: "default" or "celery"; the broker and result backend of the latter
    executor: str = "default"
    celery_broker_url: str = DEFAULT_BROKER_URL
    celery_backend_url: str = DEFAULT_BACKEND_URL

    @property
    def tz(self):
        return zone(self.timezone)

    @property
    def paid_orders_location(self) -> str:
        """PAID_ORDERS_URL, or ``<data_dir>/paid_orders``: a local path or an fsspec URL."""
        return self.paid_orders_url or str(self.data_dir / "paid_orders")

    @property
    def paid_orders_dir(self):
        """The folder as a path: a ``Path`` on local disk, a ``UPath`` on an object store."""
        location = self.paid_orders_location
        if not is_url(location):
            return Path(location)
        from upath import UPath  # only for a URL: fsspec costs a tenth of a second to load

        return UPath(location)


def files_location(settings: Settings, spec, files) -> str:
    """Where the day files ``files`` of the declared table ``spec`` live: the file's own
    ``url``; for ``orders``' first file set (``spec.legacy``), PAID_ORDERS_URL as always;
    else ``<PIPELINE_DATA_DIR>/<name>``. A local path or an fsspec URL."""
    if files.url:
        return _location(files.url, Path.cwd())
    if spec.legacy is not None and files.name == spec.daily_files[0].name:
        return settings.paid_orders_location
    return str(settings.data_dir / files.name)


def _location(raw: str, base: Path) -> str:
    """A folder as given (a local path, relative to ``base``, or an fsspec URL)."""
    raw = raw.strip()
    if raw.startswith("file://"):
        raw = raw[len("file://") :]
    if raw and not is_url(raw):
        return os.path.abspath(base / raw)
    return raw


def from_env(environ: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Settings from ``environ`` (default: the process environment), with the defaults."""
    env = os.environ if environ is None else environ
    base = Path(cwd) if cwd is not None else Path.cwd()
    data_dir = Path(env.get("PIPELINE_DATA_DIR") or "data")
    if not data_dir.is_absolute():
        data_dir = base / data_dir
    data_dir = Path(os.path.abspath(data_dir))

    lookback = _days(env, "LOOKBACK_DAYS")
    reconcile = _days(env, "RECONCILE_DAYS")
    raw_start = env.get("PARTITIONS_START_DATE") or DEFAULTS["PARTITIONS_START_DATE"]
    raw_tz = env.get("PIPELINE_TIMEZONE") or DEFAULTS["PIPELINE_TIMEZONE"]
    start = _parsed(parse_day, raw_start, "PARTITIONS_START_DATE")
    _parsed(zone, raw_tz, "PIPELINE_TIMEZONE")
    paid_orders_url = _location(env.get("PAID_ORDERS_URL") or "", base)
    return Settings(
        data_dir=data_dir,
        paid_orders_url=paid_orders_url,
        source_url=env.get("SOURCE_DATABASE_URL") or f"sqlite:///{data_dir / 'app.db'}",
        warehouse_url=env.get("WAREHOUSE_DATABASE_URL") or f"sqlite:///{data_dir / 'warehouse.db'}",
        lookback_days=lookback,
        partitions_start=start,
        timezone=raw_tz,
        source_url_from_env=bool(env.get("SOURCE_DATABASE_URL")),
        warehouse_url_from_env=bool(env.get("WAREHOUSE_DATABASE_URL")),
        automation=_switch(env, "PIPELINE_AUTOMATION", default=True),
        reconcile_days=reconcile,
        max_delete_share=_share(env, "MAX_DELETE_SHARE"),
        executor=_choice(env, "PIPELINE_EXECUTOR", EXECUTORS),
        celery_broker_url=(env.get("CELERY_BROKER_URL") or "").strip()
        or DEFAULTS["CELERY_BROKER_URL"],
        celery_backend_url=(env.get("CELERY_BACKEND_URL") or "").strip()
        or DEFAULTS["CELERY_BACKEND_URL"],
    )


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    raw = (env.get(name) or DEFAULTS[name]).strip().lower()
    if raw not in choices:
        raise SettingsError(f"{name}={raw!r} must be one of: {', '.join(choices)}")
    return raw


def _parsed(parse, raw: str, name: str):
    """``parse(raw)``, or a :class:`SettingsError` that names the variable ``name``."""
    try:
        return parse(raw)
    except TimeValueError as exc:
        raise SettingsError(f"{name}: {exc}") from None


def _days(env: Mapping[str, str], name: str) -> int:
    raw = env.get(name) or DEFAULTS[name]
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
    except ValueError:
        raise SettingsError(f"{name}={raw!r} must be a whole number of days, 0 or more") from None
    return value


def _share(env: Mapping[str, str], name: str) -> float:
    raw = (env.get(name) or DEFAULTS[name]).strip()
    try:
        value = float(raw)
        if not 0.0 <= value <= 1.0:
            raise ValueError
    except ValueError:
        raise SettingsError(
            f"{name}={raw!r} must be a share between 0 and 1, such as 0.5 "
            "(0: a range load may delete nothing without allow_deletes)"
        ) from None
    return value


def _switch(env: Mapping[str, str], name: str, *, default: bool) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("on", "true", "1", "yes"):
        return True
    if raw in ("off", "false", "0", "no"):
        return False
    raise SettingsError(f"{name}={raw!r} must be on or off")

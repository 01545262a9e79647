"""An app writing its ``orders`` table as a real one would, for the kill tests.

Run as a separate process: ``python app_writer.py URL --seed S --seconds N --sim-start
ISO --sim-days D``. For ``--seconds`` it writes, a few times a second, with plain SQL:

- new orders (``paid``, ``pending`` or ``refunded``), stamped with the app's clock;
- updates of existing orders (new status and amount) stamped with the app's clock, which
  moves them to another day when their old stamp was on an earlier one;
- late orders and late updates, stamped up to 30 hours behind the app's clock (well
  within the pipeline's 2-day lookback).

The app's clock runs from ``--sim-start`` over ``--sim-days`` days during those seconds,
so that many days are touched and every stamp is on a day that is already over. The
same seed gives the same writes. Imports nothing of the pipeline. Prints one JSON line
of counts at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from datetime import datetime, timedelta

import sqlalchemy as sa

UPSERT = sa.text(
    "INSERT INTO orders (order_id, status, amount, updated_at) "
    "VALUES (:order_id, :status, :amount, :updated_at) "
    "ON CONFLICT (order_id) DO UPDATE SET status = excluded.status, "
    "amount = excluded.amount, updated_at = excluded.updated_at"
)


def stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def create_table(engine: sa.Engine) -> None:
    """The app's own schema: text columns, an index on updated_at."""
    key = "BIGINT" if engine.dialect.name == "postgresql" else "INTEGER"
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE orders (order_id {key} PRIMARY KEY, "
                "status TEXT NOT NULL, amount TEXT NOT NULL, "
                "updated_at TEXT NOT NULL)"
            )
        )
        conn.execute(sa.text("CREATE INDEX orders_updated_at_idx ON orders (updated_at)"))


def seed_orders(engine: sa.Engine, rng: random.Random, start: datetime, count: int) -> None:
    """The orders the app has before the pipeline first looks: spread over two days."""
    with engine.begin() as conn:
        for order_id in range(1, count + 1):
            at = start + timedelta(minutes=rng.randrange(0, 48 * 60))
            conn.execute(
                UPSERT,
                {
                    "order_id": order_id,
                    "status": _status(rng),
                    "amount": _amount(rng),
                    "updated_at": stamp(at),
                },
            )


def _status(rng: random.Random) -> str:
    return rng.choices(["paid", "pending", "refunded"], weights=[7, 2, 1])[0]


def _amount(rng: random.Random) -> str:
    return f"{rng.randrange(100, 20000) / 100:.2f}"


def write(
    engine: sa.Engine, rng: random.Random, *, seconds: float, sim_start: datetime, sim_days: float
) -> dict:
    counts = {"new": 0, "updated": 0, "late_new": 0, "late_updated": 0}
    with engine.connect() as conn:
        next_id = (
            int(conn.execute(sa.text("SELECT coalesce(max(order_id), 0) FROM orders")).scalar()) + 1
        )
    began = time.monotonic()
    while (elapsed := time.monotonic() - began) < seconds:
        now = sim_start + timedelta(days=sim_days * elapsed / seconds)
        kind = rng.choices(list(counts), weights=[5, 3, 1, 1])[0]
        late = kind.startswith("late")
        at = now - timedelta(minutes=rng.randrange(60, 30 * 60)) if late else now
        if kind.endswith("new"):
            order_id, next_id = next_id, next_id + 1
        else:
            order_id = rng.randrange(1, next_id)
        with engine.begin() as conn:
            conn.execute(
                UPSERT,
                {
                    "order_id": order_id,
                    "status": _status(rng),
                    "amount": _amount(rng),
                    "updated_at": stamp(at),
                },
            )
        counts[kind] += 1
        time.sleep(rng.uniform(0.05, 0.3))
    counts["orders"] = next_id - 1
    return counts


def engine_for(url: str) -> sa.Engine:
    if url.startswith("sqlite"):
        return sa.create_engine(url, connect_args={"timeout": 60})
    return sa.create_engine(url)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=45)
    parser.add_argument("--sim-start", required=True)
    parser.add_argument("--sim-days", type=float, default=8)
    args = parser.parse_args(argv)
    engine = engine_for(args.url)
    try:
        counts = write(
            engine,
            random.Random(args.seed),
            seconds=args.seconds,
            sim_start=datetime.fromisoformat(args.sim_start),
            sim_days=args.sim_days,
        )
    finally:
        engine.dispose()
    print(json.dumps(counts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A SQLite database read through its Arrow driver in a process of its own.

The fast way to read a million warehouse rows into Arrow is the ADBC SQLite driver (0.5 s,
against 2 s for the ``sqlite3`` module's tuples). But that driver is a second copy of the
SQLite library, and two copies in one process do not see each other's POSIX locks: one
opening a WAL database that the other has open takes itself for the only connection and
truncates the shared-memory file under the other (SIGBUS), and one closing it last
checkpoints and deletes the WAL under the other ("disk I/O error"). A warehouse has
``sqlite3`` connections open in every process that loads or checks. So the driver runs
here, in a child process: to SQLite an ordinary other reader, read-only, and the rows
come back as an Arrow IPC stream over a pipe.

    python -m pipeline_assets.core.db.sqlite_reader   # a JSON request on stdin
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator


class ReaderError(RuntimeError):
    """The reader process could not read (its first line of stderr says why)."""


def read(database: str, statements: list[str], batch_rows: int) -> Iterator:
    """The rows of each of ``statements`` in turn (one result schema) on the SQLite
    ``database`` (a path or a ``file:`` URI), as Arrow record batches streamed from one
    reader process. Stops the process if the caller stops."""
    import pyarrow as pa

    proc = subprocess.Popen(
        [sys.executable, "-m", __name__],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        proc.stdin.write(
            json.dumps(
                {"database": database, "statements": statements, "batch_rows": batch_rows}
            ).encode()
        )
        proc.stdin.close()
        try:
            yield from pa.ipc.open_stream(proc.stdout)
        except pa.ArrowInvalid:  # the reader died before it wrote a stream: it says why
            pass
        proc.stdout.close()
        error = proc.stderr.read().decode(errors="replace").strip()
        if proc.wait() != 0:
            raise ReaderError(
                error.splitlines()[-1]
                if error
                else f"the SQLite reader exited with {proc.returncode}"
            )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()


def _read_only(database: str) -> str:
    """``database`` as a URI SQLite opens read-only: a reader never writes, nor
    checkpoints the WAL when it closes."""
    if database.startswith("file:"):
        path, _, query = database.partition("?")
        params = [p for p in query.split("&") if p and not p.startswith("mode=")]
        return f"{path}?{'&'.join(['mode=ro', *params])}"
    from urllib.parse import quote

    return f"file:{quote(database)}?mode=ro"


def main() -> int:
    request = json.loads(sys.stdin.read())
    import adbc_driver_sqlite.dbapi as adbc_sqlite
    import pyarrow as pa

    try:
        conn = adbc_sqlite.connect(_read_only(request["database"]))
        cursor = conn.cursor()
        cursor.execute("PRAGMA busy_timeout = 60000")
        cursor.adbc_statement.set_options(
            **{"adbc.sqlite.query.batch_rows": str(max(1, min(request["batch_rows"], 65_536)))}
        )
        writer = schema = None
        for sql in request["statements"]:
            cursor.execute(sql)
            for batch in cursor.fetch_record_batch():
                if not batch.num_rows:  # the driver infers types from rows: none, no types
                    continue
                if writer is None:
                    schema = batch.schema
                    writer = pa.ipc.new_stream(sys.stdout.buffer, schema)
                writer.write_batch(batch if batch.schema == schema else batch.cast(schema))
        if writer is not None:
            writer.close()
        cursor.close()
        conn.close()
    except BrokenPipeError:  # the caller stopped reading: nothing more to do
        return 0
    except Exception as exc:  # noqa: BLE001 - the parent words it; one line here
        print(
            f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

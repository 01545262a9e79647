"""What went wrong with a database, in one word, from the driver's own code.

The kinds a :class:`~pipeline_assets.core.db.engines.DatabaseError` carries, and the tables that
map SQLite's result codes, PostgreSQL's SQLSTATEs and MySQL's error numbers to them.
:func:`classify` is the one reader of these tables (``db.guard`` calls it).
"""

from __future__ import annotations

import re

import sqlalchemy as sa

READ_ONLY = "read-only"  # the database, or this role, cannot write
NO_PERMISSION = "no permission"  # the role lacks a right (SELECT, CREATE, ...)
FULL = "full"  # out of disk space
BUSY = "busy"  # another writer held a lock longer than we wait
UNREACHABLE = "unreachable"  # no server, no file, bad credentials, no such database

# SQLite primary result codes (https://www.sqlite.org/rescode.html)
_SQLITE_CODES = {
    3: NO_PERMISSION,  # SQLITE_PERM
    5: BUSY,  # SQLITE_BUSY
    6: BUSY,  # SQLITE_LOCKED
    8: READ_ONLY,  # SQLITE_READONLY (and its extended codes)
    10: UNREACHABLE,  # SQLITE_IOERR
    11: UNREACHABLE,  # SQLITE_CORRUPT: not a database we can read
    13: FULL,  # SQLITE_FULL
    14: UNREACHABLE,  # SQLITE_CANTOPEN
    23: NO_PERMISSION,  # SQLITE_AUTH
    26: UNREACHABLE,  # SQLITE_NOTADB
}
# PostgreSQL SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html):
# exact codes first, then classes (the first two characters)
_SQLSTATES = {
    "25006": READ_ONLY,  # read_only_sql_transaction
    "42501": NO_PERMISSION,  # insufficient_privilege
    "53100": FULL,  # disk_full
    "53300": UNREACHABLE,  # too_many_connections
    "55P03": BUSY,  # lock_not_available
    "40001": BUSY,  # serialization_failure
    "40P01": BUSY,  # deadlock_detected
    "57014": BUSY,  # query_canceled (statement or lock timeout)
    "3D000": UNREACHABLE,  # invalid_catalog_name: no such database
}
_SQLSTATE_CLASSES = {
    "08": UNREACHABLE,  # connection exception
    "28": UNREACHABLE,  # invalid authorization
    "57": UNREACHABLE,  # operator intervention: shutdown, cannot connect now
    "58": UNREACHABLE,  # system error: I/O error on the server
}


# MySQL and MariaDB error numbers (the server's, and the client library's 2xxx)
_MYSQL_ERRORS = {
    1044: NO_PERMISSION,  # ER_DBACCESS_DENIED_ERROR: no rights on the database
    1142: NO_PERMISSION,  # ER_TABLEACCESS_DENIED_ERROR: no SELECT on orders
    1143: NO_PERMISSION,  # ER_COLUMNACCESS_DENIED_ERROR
    1045: UNREACHABLE,  # ER_ACCESS_DENIED_ERROR: wrong user or password
    1049: UNREACHABLE,  # ER_BAD_DB_ERROR: no such database
    1040: UNREACHABLE,  # ER_CON_COUNT_ERROR: too many connections
    1053: UNREACHABLE,  # ER_SERVER_SHUTDOWN
    2002: UNREACHABLE,
    2003: UNREACHABLE,
    2005: UNREACHABLE,  # cannot connect
    2006: UNREACHABLE,
    2013: UNREACHABLE,  # the server went away, lost the connection
    1205: BUSY,  # ER_LOCK_WAIT_TIMEOUT
    1213: BUSY,  # ER_LOCK_DEADLOCK
    1021: FULL,  # ER_DISK_FULL
    1114: FULL,  # ER_RECORD_FILE_FULL
    1290: READ_ONLY,  # ER_OPTION_PREVENTS_STATEMENT (--read-only)
    1792: READ_ONLY,  # ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
}


def mysql_error_number(error: BaseException) -> int | None:
    """The MySQL/MariaDB error number of a driver error: PyMySQL's first argument, or the
    ``ERROR 1045`` a columnar reader (connectorx) puts in its message."""
    args = getattr(error, "args", ())
    if args and isinstance(args[0], int) and type(error).__module__.startswith("pymysql"):
        return args[0]
    match = re.search(r"\bERROR (\d{4})\b", str(error))
    if match and "MySqlError" in str(error):
        return int(match.group(1))
    if "DriverError" in str(error) and "Could not connect" in str(error):
        return 2003
    return None


def classify(exc: BaseException) -> str | None:
    """What kind of database failure ``exc`` is, from the driver's code; None: not one.

    PostgreSQL errors carry a SQLSTATE (psycopg's ``sqlstate``), SQLite errors a result
    code (``sqlite_errorcode``), MySQL and MariaDB errors an error number. An
    OperationalError or InterfaceError with no code we know (a server that never answered
    has none) counts as unreachable. Any other code — bad
    SQL, a missing table, a broken constraint — is not a database the user must fix but
    a bug, and stays itself.
    """
    orig = getattr(exc, "orig", exc)
    code = getattr(orig, "sqlite_errorcode", None)
    if isinstance(code, int):  # the primary code is the low byte of an extended one
        return _SQLITE_CODES.get(code & 0xFF)
    number = mysql_error_number(orig)  # before SQLSTATE: PyMySQL carries one too, vaguer
    if number is not None:
        return _MYSQL_ERRORS.get(number)
    state = getattr(orig, "sqlstate", None)
    if isinstance(state, str) and state:
        return _SQLSTATES.get(state) or _SQLSTATE_CLASSES.get(state[:2])
    if isinstance(exc, (sa.exc.OperationalError, sa.exc.InterfaceError)):
        return UNREACHABLE  # the driver never got an answer: no server, no socket
    return None

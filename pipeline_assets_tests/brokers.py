"""Real brokers and real Celery workers, for the tests of ``PIPELINE_EXECUTOR=celery``.

- RabbitMQ, the default broker, runs on 127.0.0.1:5672 on every machine of this project
  (CI's included): each test gets a virtual host of its own (``rabbitmqctl``), deleted
  after it, so no two tests ever share a queue;
- :class:`RedisServer`: a private ``redis-server`` on a free port, with a password, that
  a test stops and starts again on the same port (the broker going down);
- :class:`CeleryWorker`: ``deploy/celery-worker.sh`` as shipped, in a session of its own
  (its pool with it), so a test can stop it, SIGKILL it whole as a lost machine, and
  start it again under the same name;
- :class:`WorkerKeeper`: brings a dead worker back two seconds later, whenever it dies,
  as a supervisor would.

Where a server is missing, the tests skip on a laptop and fail in CI (``unavailable``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

from .support import free_port, unavailable

ROOT = Path(__file__).resolve().parent.parent
WORKER_SCRIPT = ROOT / "deploy" / "celery-worker.sh"
RABBITMQ = ("127.0.0.1", 5672)


def _answers(url: str) -> str | None:
    """None when a broker answers at ``url``, else why not."""
    from kombu import Connection

    connection = Connection(url, connect_timeout=3)
    try:
        connection.ensure_connection(max_retries=1, timeout=3)
        return None
    except Exception as exc:  # noqa: BLE001 - any failure: the server is not usable here
        return f"{type(exc).__name__}: {exc}"
    finally:
        connection.release()


def _rabbitmqctl(*args: str) -> None:
    subprocess.run(["rabbitmqctl", "-q", *args], check=True, capture_output=True, timeout=60)


class RabbitVhost:
    """A fresh virtual host on the local RabbitMQ for one test; ``url`` reaches it."""

    def __init__(self):
        problem = None
        if shutil.which("rabbitmqctl") is None:
            problem = "rabbitmqctl is not on PATH"
        else:
            problem = _answers("pyamqp://guest:guest@127.0.0.1:5672//")
        if problem:
            unavailable(
                f"no RabbitMQ at 127.0.0.1:5672 to make a virtual host on ({problem})",
                ci_hint="CI must run the Celery tests: start RabbitMQ (rabbitmq-server -detached)",
            )
        self.name = f"pa_{uuid.uuid4().hex[:12]}"
        _rabbitmqctl("add_vhost", self.name)
        _rabbitmqctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")
        self.url = f"pyamqp://guest:guest@{RABBITMQ[0]}:{RABBITMQ[1]}/{self.name}"

    def delete(self) -> None:
        _rabbitmqctl("delete_vhost", self.name)


class RedisServer:
    """A private ``redis-server`` on 127.0.0.1 and a free port, keeping nothing on disk,
    with ``password``; :meth:`stop` and :meth:`start` keep the port."""

    def __init__(self, folder: Path, password: str):
        if shutil.which("redis-server") is None:
            unavailable(
                "redis-server is not on PATH",
                ci_hint="CI must run the Celery tests: install redis-server",
            )
        self.folder, self.password = folder, password
        self.port = free_port()
        self.url = f"redis://:{password}@127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        log = open(self.folder / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--requirepass",
                self.password,
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.folder),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 20
        while _answers(self.url) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start; see {self.folder}")
            time.sleep(0.1)

    def stop(self) -> None:
        """The broker goes down: every message it held is gone with it."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=20)


class CeleryWorker:
    """One worker of ``deploy/celery-worker.sh``, named ``name``, output to ``log``."""

    def __init__(self, name: str, env: Mapping[str, str], log: Path):
        self.name, self.env, self.log = name, dict(env), log
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> CeleryWorker:
        env = self.env | {"CELERY_WORKER_NAME": f"{self.name}@%h", "PYTHON": sys.executable}
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(WORKER_SCRIPT)],
                env=env,
                cwd=self.log.parent,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.starts += 1
        return self

    def ready_count(self) -> int:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return len(re.findall(rf"{re.escape(self.name)}@\S+ ready\.", text))

    def wait_ready(self, timeout: float = 90) -> None:
        """Until this start of the worker says it is ready (it has loaded the code
        location and connected to the broker)."""
        deadline = time.monotonic() + timeout
        while self.ready_count() < self.starts:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"worker {self.name} exited ({self.proc.returncode}):\n"
                    f"{self.log.read_text(errors='replace')[-3000:]}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"worker {self.name} not ready within {timeout:.0f} s:\n"
                    f"{self.log.read_text(errors='replace')[-3000:]}"
                )
            time.sleep(0.2)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker and its pool at once: a machine lost."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=20)

    def stop(self, timeout: float = 60) -> None:
        """SIGTERM (warm shutdown: the running step finishes); SIGKILL after ``timeout``."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            self.kill()
        try:  # the pool's processes, if any outlived their parent
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class WorkerKeeper(threading.Thread):
    """A supervisor for ``pool``: a worker found dead is started again ``delay`` seconds
    later, whenever it died (while the app writes, while loads are killed, while the
    pipeline converges), and each death is recorded in ``kills`` as
    ``(when, pid, "celery worker", "-", name)``. :meth:`halt` before stopping the pool."""

    def __init__(self, pool: list[CeleryWorker], kills: list, delay: float = 2.0):
        super().__init__(name="worker-keeper", daemon=True)
        self.pool, self.kills, self.delay = pool, kills, delay
        self._halt = threading.Event()

    def run(self) -> None:
        down: dict[str, float] = {}
        while not self._halt.wait(0.2):
            now = time.monotonic()
            for worker in self.pool:
                if worker.name in down:
                    if now >= down[worker.name]:
                        del down[worker.name]
                        worker.start()
                elif not worker.alive:
                    self.kills.append((now, worker.proc.pid, "celery worker", "-", worker.name))
                    down[worker.name] = now + self.delay

    def all_ready(self) -> bool:
        """Every worker alive and its latest start ready."""
        return all(w.alive and w.ready_count() >= w.starts for w in self.pool)

    def halt(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=10)

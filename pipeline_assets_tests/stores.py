"""The two stores of the day files, for tests: a local folder and a bucket on a real
S3-compatible server (moto's standalone server, ``moto[server]`` from the dev extra),
started by the tests on 127.0.0.1 in its own process group and stopped by its PID.

Why moto's server: it installs from the package registry with the rest of the dev
extra (no binary download, no container), speaks the S3 HTTP API that s3fs/botocore
use in production, and starts in about a second, so CI runs the object-store tests on
a fresh clone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

from upath import UPath

from .support import free_port

# Fake credentials (the server accepts any); the secret is distinctive so tests can
# prove it never shows in logs, metadata or errors.
SECRET = "moto-secret-" + uuid.uuid4().hex
ACCESS_KEY = "testing-access-key"


class S3Server:
    """``moto_server`` on a free port; ``env`` is what a client needs to reach it."""

    def __init__(self, log: Path):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not start; see {log}") from None
                time.sleep(0.1)

    def bucket(self) -> str:
        """A new empty bucket; its name."""
        import boto3

        name = f"pa-{uuid.uuid4().hex[:16]}"
        boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET,
        ).create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self._log.close()


def all_files(folder) -> dict[str, bytes]:
    """Every file under ``folder`` (a Path or an s3 UPath), relative name → bytes."""
    if isinstance(folder, UPath):
        # no listings cache: another process may have written since the last listing
        fs = UPath(str(folder), use_listings_cache=False).fs
        base = folder.path.rstrip("/")
        try:
            keys = fs.find(base)
        except FileNotFoundError:
            return {}
        return {key[len(base) + 1 :]: fs.cat_file(key) for key in keys}
    folder = Path(folder)
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def temp_files(folder) -> list[str]:
    return sorted(name for name in all_files(folder) if name.endswith(".partial"))

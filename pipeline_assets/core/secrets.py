"""What no message may show: the password of a URL, a credential from the environment.

The one home of redaction, for every message the pipeline writes — database errors,
object-store errors, logs, metadata — whichever part of it the text comes from.
"""

from __future__ import annotations

import os
import re

from sqlalchemy.engine import URL, make_url

# the variables whose values no message may show (the SDKs read them; we only redact them)
SECRET_VARIABLES = (
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_SAS_TOKEN",
)
# the userinfo of any URL in a text: "user:secret@" keeps its user, "token@" is all secret
_USERINFO = re.compile(r"(?<=://)(?:([^/:@\s]*):)?[^/@\s]+@")


def redact(url: str | URL) -> str:
    """``url`` as it may be shown: its password (or a bare token before ``@``) as ``***``."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: an unparseable one must not leak either
        return _redact_text(str(url))


def _redact_text(text: str) -> str:
    return _USERINFO.sub(lambda m: f"{m.group(1)}:***@" if m.group(1) is not None else "***@", text)


def scrub(text: str, *urls: str | URL) -> str:
    """``text`` with the password of each of ``urls``, the userinfo of any URL in it and
    any credential of the environment replaced by ``***`` (driver errors echo them)."""
    for url in urls:
        try:
            password = make_url(url).password
        except Exception:  # not a SQLAlchemy URL: its userinfo is redacted below
            password = None
        if password:
            text = text.replace(str(password), "***")
    text = _redact_text(text)
    for name in SECRET_VARIABLES:
        secret = os.environ.get(name)
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text

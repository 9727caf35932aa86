"""The running-instance profile: how the CLI finds the Interlock started in this folder.

``interlock dev`` and ``interlock up`` write ``.interlock/profile.toml`` in their working
directory once they answer, and remove it when they stop cleanly (if it is still theirs: another
instance may have started here since). It says where the gateway listens, the development key
when one is in use, and which store holds the data, so that ``interlock executions ...`` and
``interlock keys ...`` run in the same folder need no settings::

    url = "http://127.0.0.1:8000"
    api_key = "ilk_..."
    project = "demo"
    workspace = "default"
    pid = 4242

    [store]
    sqlite = "/home/me/project/.interlock/dev/interlock.sqlite"

or, on MongoDB, ``mongodb_uri`` and ``mongodb_database`` in ``[store]``. The file holds a key
and possibly database credentials: it is readable by its owner only. ``pid`` tells a live
instance's profile from one a crash left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from interlock.dev import DevSettings

RUNNING_PROFILE = Path(".interlock") / "profile.toml"
"""Relative to the instance's working directory."""
DEV_PROJECT = "demo"
DEV_WORKSPACE = "default"
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::", "[::]"})


@dataclass(frozen=True)
class RunningInstance:
    url: str
    pid: int
    store: Mapping[str, str]
    """``{"sqlite": path}`` or ``{"mongodb_uri": ..., "mongodb_database": ...}``."""
    api_key: str | None = None
    project: str = DEV_PROJECT
    workspace: str = DEV_WORKSPACE


def connectable_url(host: str, port: int | str) -> str:
    """The URL a client on this machine uses for a server listening on ``host``: a wildcard
    address listens everywhere but is not an address to connect to."""
    if host in WILDCARD_HOSTS:
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"  # IPv6
    return f"http://{host}:{port}"


def sqlite_store(path: Path) -> dict[str, str]:
    return {"sqlite": str(path.resolve())}


def mongodb_store(uri: str, database: str) -> dict[str, str]:
    return {"mongodb_uri": uri, "mongodb_database": database}


def dev_instance(settings: DevSettings) -> RunningInstance:
    """What ``interlock dev`` with these settings tells the CLI (the store as ``embedded()``
    and ``on_infrastructure()`` in interlock/dev.py open it)."""
    store = (
        sqlite_store(settings.data_dir / "interlock.sqlite")
        if settings.embedded
        else mongodb_store(settings.mongodb_uri, settings.mongodb_database)
    )
    return RunningInstance(
        url=connectable_url(settings.host, settings.port),
        pid=os.getpid(),
        store=store,
        api_key=settings.dev_api_key if settings.environment == "development" else None,
    )


def up_instance(host: str, port: str, environ: Mapping[str, str]) -> RunningInstance:
    """What ``interlock up`` tells the CLI: its services read their settings from ``environ``."""
    from shared.settings import CommonSettings

    # The services' own defaults, read off the settings class rather than repeated here.
    fields = CommonSettings.model_fields
    development = environ.get("INTERLOCK_ENVIRONMENT", "development") == "development"
    return RunningInstance(
        url=connectable_url(host, port),
        pid=os.getpid(),
        store=mongodb_store(
            environ.get("INTERLOCK_MONGODB_URI") or str(fields["mongodb_uri"].default),
            environ.get("INTERLOCK_MONGODB_DATABASE") or str(fields["mongodb_database"].default),
        ),
        api_key=(environ.get("INTERLOCK_DEV_API_KEY") or None) if development else None,
    )


def to_toml(instance: RunningInstance) -> str:
    lines = [f"url = {_toml_string(instance.url)}"]
    if instance.api_key:
        lines.append(f"api_key = {_toml_string(instance.api_key)}")
    lines += [
        f"project = {_toml_string(instance.project)}",
        f"workspace = {_toml_string(instance.workspace)}",
        f"pid = {int(instance.pid)}",
        "",
        "[store]",
        *(f"{name} = {_toml_string(value)}" for name, value in instance.store.items()),
    ]
    return "\n".join(lines) + "\n"


def _toml_string(value: str) -> str:
    # A TOML basic string accepts JSON's escapes, except that DEL must be escaped too and
    # \uD8xx surrogate pairs are not allowed (hence ensure_ascii=False).
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def read(path: Path) -> dict[str, Any]:
    """The profile's keys; raises OSError or tomllib.TOMLDecodeError."""
    with path.open("rb") as handle:
        return tomllib.load(handle)


def process_alive(pid: object) -> bool:
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    except OSError:
        return False
    return True


def live_profile(path: Path) -> dict[str, Any] | None:
    """The running-instance profile at ``path`` if its process still runs; None when there is
    none, it is unreadable, or a crash left it behind."""
    try:
        profile = read(path)
    except (OSError, tomllib.TOMLDecodeError):
        return None
    return profile if process_alive(profile.get("pid")) else None


class RunningProfile:
    """This process's profile: ``write`` once it answers, ``remove`` when it stops."""

    def __init__(self, instance: RunningInstance, path: Path = RUNNING_PROFILE) -> None:
        self.instance = instance
        self.path = path.absolute()

    def write(self) -> None:
        """Write it readable by the owner only. A folder that cannot be written is no reason
        to stop serving: say so on stderr and go on."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        try:
            # Private, like the dev data folder in it (interlock/dev.py).
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                temporary.unlink()
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                handle.write(to_toml(self.instance))
            # Atomic: a CLI reading at the same moment sees the old file or the new one.
            os.replace(temporary, self.path)
        except OSError as exc:
            print(f"warning: could not write {self.path}: {exc}", file=sys.stderr, flush=True)

    def remove(self) -> None:
        """Remove it if it is still this process's (another instance may have replaced it)."""
        try:
            if read(self.path).get("pid") == self.instance.pid:
                self.path.unlink()
        except (OSError, tomllib.TOMLDecodeError):
            pass  # gone or replaced by something unreadable: not ours to remove

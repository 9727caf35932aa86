"""Where the CLI finds the gateway and its key: flags, then environment, then a profile file,
then the default.

The profile is TOML with top-level keys (interlock/profile.py writes one for a running
instance), e.g.::

    url = "http://127.0.0.1:8000"
    api_key = "ilk_..."
    project = "demo"
    workspace = "default"

Which profile: ``INTERLOCK_PROFILE`` when set; else the profile of the Interlock running in this
folder (``.interlock/profile.toml``, ignored once its process is gone); else
``~/.config/interlock/profile.toml``. Each value remembers where it came from, for ``--verbose``
and for error messages that say what to change.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.profile import RUNNING_PROFILE, live_profile
from interlock.profile import read as read_toml

DEFAULT_PROFILE = Path("~/.config/interlock/profile.toml")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = "8000"
DEFAULT_PROJECT = "demo"
DEFAULT_WORKSPACE = "default"


class ConfigError(Exception):
    """The configuration is missing or unreadable: a usage error, not a gateway error."""


@dataclass(frozen=True)
class Profile:
    path: Path
    values: Mapping[str, Any]
    running: bool
    """The profile of an Interlock running in this folder (written by ``interlock dev|up``)."""

    @property
    def source(self) -> str:
        return f"the profile {self.path}"


@dataclass(frozen=True)
class Config:
    url: str
    api_key: str
    project: str
    workspace: str
    url_source: str = "default"
    """Where ``url`` came from: ``--url``, ``INTERLOCK_URL``, ``the profile PATH``, or the
    default (with the ``INTERLOCK_PORT`` it used)."""
    key_source: str = "--key"

    def describe(self) -> str:
        """One line for ``--verbose``: which server, and why that one (never the key itself)."""
        return (
            f"interlock: gateway {self.url} (from {self.url_source}); key from"
            f" {self.key_source}; project {self.project}, workspace {self.workspace}"
        )


def choose_profile(env: Mapping[str, str], cwd: Path | None = None) -> Profile:
    """The profile to read (see the module docstring); a missing file is an empty profile."""
    if env.get("INTERLOCK_PROFILE"):
        path = Path(env["INTERLOCK_PROFILE"]).expanduser()
        return Profile(path, _read(path), running=False)
    running = (cwd or Path.cwd()) / RUNNING_PROFILE
    values = live_profile(running)
    if values is not None:
        return Profile(running, values, running=True)
    path = DEFAULT_PROFILE.expanduser()
    return Profile(path, _read(path), running=False)


def _read(path: Path) -> dict[str, Any]:
    try:
        return read_toml(path)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the profile {path}: {exc}") from exc


def default_url(env: Mapping[str, str]) -> tuple[str, str]:
    """The URL of a gateway on this machine, on ``INTERLOCK_PORT`` as ``interlock dev`` and
    ``interlock up`` listen; and how it was made."""
    port = env.get("INTERLOCK_PORT")
    if port:
        return f"http://{DEFAULT_HOST}:{port}", f"the default with INTERLOCK_PORT={port}"
    return f"http://{DEFAULT_HOST}:{DEFAULT_PORT}", "the default"


def load_config(
    *,
    url: str | None = None,
    key: str | None = None,
    project: str | None = None,
    workspace: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    env = os.environ if env is None else env
    profile = choose_profile(env, cwd)

    def pick(flag: str | None, option: str, var: str, field: str) -> tuple[str, str] | None:
        # Empty strings count as unset: `INTERLOCK_URL= interlock ...` should fall through.
        for value, source in (
            (flag, option),
            (env.get(var), var),
            (profile.values.get(field), profile.source),
        ):
            if value:
                return str(value), source
        return None

    api_key = pick(key, "--key", "INTERLOCK_API_KEY", "api_key")
    if api_key is None:
        raise ConfigError(
            "no API key: pass --key or set INTERLOCK_API_KEY (`interlock keys create` makes"
            f" one), put api_key in {profile.path}, or run this in the folder where"
            " `interlock dev` runs (it uses the development key)"
        )
    gateway = pick(url, "--url", "INTERLOCK_URL", "url") or default_url(env)
    chosen_project = pick(project, "--project", "INTERLOCK_PROJECT", "project")
    chosen_workspace = pick(workspace, "--workspace", "INTERLOCK_WORKSPACE", "workspace")
    return Config(
        url=gateway[0].rstrip("/"),
        api_key=api_key[0],
        project=chosen_project[0] if chosen_project else DEFAULT_PROJECT,
        workspace=chosen_workspace[0] if chosen_workspace else DEFAULT_WORKSPACE,
        url_source=gateway[1],
        key_source=api_key[1],
    )

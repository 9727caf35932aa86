"""Where the CLI finds the gateway and its key: flags, then environment, then a profile file.

The profile is TOML with top-level keys, e.g.::

    url = "http://127.0.0.1:8000"
    api_key = "ilk_..."
    project = "demo"
    workspace = "default"
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_PROFILE = Path("~/.config/interlock/profile.toml")
DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_PROJECT = "demo"
DEFAULT_WORKSPACE = "default"


class ConfigError(Exception):
    """The configuration is missing or unreadable: a usage error, not a gateway error."""


@dataclass(frozen=True)
class Config:
    url: str
    api_key: str
    project: str
    workspace: str


def profile_path(env: Mapping[str, str]) -> Path:
    return Path(env.get("INTERLOCK_PROFILE") or DEFAULT_PROFILE).expanduser()


def read_profile(path: Path) -> dict[str, Any]:
    """The profile's keys; a missing file is an empty profile (flags and env may be enough)."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the profile {path}: {exc}") from exc


def load_config(
    *,
    url: str | None = None,
    key: str | None = None,
    project: str | None = None,
    workspace: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    env = os.environ if env is None else env
    path = profile_path(env)
    profile = read_profile(path)

    def pick(flag: str | None, var: str, field: str) -> str | None:
        # Empty strings count as unset: `INTERLOCK_URL= interlock ...` should fall through.
        for value in (flag, env.get(var), profile.get(field)):
            if value:
                return str(value)
        return None

    api_key = pick(key, "INTERLOCK_API_KEY", "api_key")
    if api_key is None:
        raise ConfigError(f"no API key: pass --key, set INTERLOCK_API_KEY or put api_key in {path}")
    return Config(
        url=(pick(url, "INTERLOCK_URL", "url") or DEFAULT_URL).rstrip("/"),
        api_key=api_key,
        project=pick(project, "INTERLOCK_PROJECT", "project") or DEFAULT_PROJECT,
        workspace=pick(workspace, "INTERLOCK_WORKSPACE", "workspace") or DEFAULT_WORKSPACE,
    )

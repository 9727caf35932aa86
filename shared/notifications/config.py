"""Which channels tell whom: the notifications file (``INTERLOCK_NOTIFICATIONS_FILE``, TOML).

```toml
[channels.ops-webhook]
type = "webhook"
url = "https://hooks.example.com/interlock"
secrets_env = "OPS_WEBHOOK_SECRETS"     # comma-separated whsec_... values: two while rotating
projects = ["demo"]                     # optional: only these projects (default: all)
agents = ["refund-approval"]            # optional: only these agents (default: all)

[channels.team-slack]
type = "slack"
url_env = "TEAM_SLACK_WEBHOOK_URL"      # a Slack webhook URL is itself a secret

[channels.reviewers]
type = "email"
host = "smtp.example.com"
port = 587
starttls = true
sender = "interlock@example.com"
recipients = ["reviewers@example.com"]
username_env = "SMTP_USER"              # optional
password_env = "SMTP_PASSWORD"          # optional
```

Secrets are never in the file: each ``*_env`` names the environment variable that holds one. A
file that does not parse, an unknown type or a missing variable stops the notifier at start-up
(a typo must not silently drop every notification).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ChannelError(ValueError):
    pass


class _Channel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    projects: list[str] | None = None
    agents: list[str] | None = None

    def wants(self, project_id: str, agent: str) -> bool:
        return (self.projects is None or project_id in self.projects) and (
            self.agents is None or agent in self.agents
        )


class WebhookConfig(_Channel):
    type: Literal["webhook"]
    url: str
    secrets_env: str


class SlackConfig(_Channel):
    type: Literal["slack"]
    url_env: str
    action_links: bool = False
    """Add signed approve / reject links (needs ``INTERLOCK_ACTION_LINK_SECRET``)."""


class EmailConfig(_Channel):
    type: Literal["email"]
    host: str
    port: int = Field(default=587, ge=1, le=65535)
    starttls: bool = False
    sender: str
    recipients: list[str] = Field(min_length=1)
    username_env: str | None = None
    password_env: str | None = None
    action_links: bool = False
    """Add signed approve / reject links (needs ``INTERLOCK_ACTION_LINK_SECRET``)."""


ChannelConfig = Annotated[WebhookConfig | SlackConfig | EmailConfig, Field(discriminator="type")]


class NotificationsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    channels: dict[str, ChannelConfig] = Field(default_factory=dict)


def load_channels(path: Path | None) -> dict[str, ChannelConfig]:
    """The configured channels by name (none without a file)."""
    if path is None:
        return {}
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        return NotificationsFile.model_validate(raw).channels
    except OSError as exc:
        raise ChannelError(f"cannot read notifications file {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ChannelError(f"notifications file {path} is not valid TOML: {exc}") from exc
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ChannelError(f"notifications file {path}: {where}: {first['msg']}") from exc


def secret(name: str, env: Mapping[str, str] = os.environ) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise ChannelError(f"environment variable {name} (a channel secret) is not set")
    return value

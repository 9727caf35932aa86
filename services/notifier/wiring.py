"""Channel configurations (shared/notifications/config.py) become channel senders."""

from __future__ import annotations

from collections.abc import Mapping

from services.notifier.channels import Channel
from services.notifier.channels.email import EmailChannel
from services.notifier.channels.slack import SlackChannel
from services.notifier.channels.webhook import WebhookChannel
from shared.notifications.action_links import LinkMinter
from shared.notifications.config import (
    ChannelConfig,
    EmailConfig,
    SlackConfig,
    WebhookConfig,
    secret,
)


def build_channels(
    configs: Mapping[str, ChannelConfig],
    env: Mapping[str, str],
    *,
    links: LinkMinter | None = None,
) -> dict[str, Channel]:
    """Every channel of the file, its secrets read now: a missing one stops the start-up.
    ``links`` mints the approve / reject links of channels with ``action_links = true``."""
    channels: dict[str, Channel] = {}
    for name, config in configs.items():
        if isinstance(config, WebhookConfig):
            secrets = [s.strip() for s in secret(config.secrets_env, env).split(",") if s.strip()]
            channels[name] = WebhookChannel(name, config.url, secrets)
        elif isinstance(config, SlackConfig):
            channels[name] = SlackChannel(
                name, secret(config.url_env, env), links=links if config.action_links else None
            )
        elif isinstance(config, EmailConfig):
            username = secret(config.username_env, env) if config.username_env else None
            password = secret(config.password_env, env) if config.password_env else None
            channels[name] = EmailChannel(
                name,
                config.host,
                config.port,
                config.sender,
                config.recipients,
                username=username,
                password=password,
                starttls=config.starttls,
                links=links if config.action_links else None,
            )
    return channels

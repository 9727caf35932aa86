"""The notifier service."""

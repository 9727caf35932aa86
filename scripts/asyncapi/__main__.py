"""``python -m scripts.asyncapi``: write docs/asyncapi.yaml, or ``--check`` that it is current."""

from scripts.asyncapi.cli import main

raise SystemExit(main())

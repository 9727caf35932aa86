"""Reading the Dockerfile and .dockerignore as Docker would, without Docker."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from tests.deploy.manifests import REPO

DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arguments for k, arguments in self.instructions if k == keyword]


def parse(text: str) -> list[Stage]:
    """Stages with their instructions; continuation lines joined, comments dropped, and the
    global ARG defaults substituted into FROM."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    arguments: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            arguments[name] = default
        elif keyword == "FROM":
            base = re.sub(r"\$\{?(\w+)\}?", lambda m: arguments[m.group(1)], rest)
            image, *alias = re.split(r"\s+AS\s+", base, flags=re.I)
            stages.append(Stage(image.strip(), alias[0].strip() if alias else None))
        else:
            stages[-1].instructions.append((keyword, rest))
    return stages


def stages() -> list[Stage]:
    return parse(DOCKERFILE.read_text())


def final_stage_user() -> int:
    """The UID the image runs as (the manifests' runAsUser must match)."""
    (user,) = stages()[-1].all("USER")[-1:]
    return int(user.partition(":")[0])


def dockerignore_excludes(path: str) -> bool:
    """Docker's rule for a path of the build context: the last pattern that matches the path or
    one of its parent folders decides, `!` re-includes. (fnmatch's `*` also crosses `/`, which is
    close enough for the patterns this file uses; `**/` also matches at the top.)"""
    excluded = False
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for raw in DOCKERIGNORE.read_text().splitlines():
        pattern = raw.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        options = [pattern, pattern[3:]] if pattern.startswith("**/") else [pattern]
        if any(fnmatch.fnmatchcase(c, p) for c in candidates for p in options):
            excluded = not negated
    return excluded

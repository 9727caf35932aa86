#!/usr/bin/env bash
# `make lock`: resolve pyproject.toml's dependencies (with the dev extra) afresh in a scratch
# virtualenv and write every package's exact version to constraints.txt. `make venv` and the
# image install under those constraints, so CI, laptops and images run the versions the suite
# was last run with, not whatever was released since. Run it after changing a dependency, then
# run `make test` before committing the new file.
set -euo pipefail
cd "$(dirname "$0")/.."

write_constraints() {
  {
    echo "# Exact versions of every dependency (with the dev extra), as \`make lock\` resolved them."
    echo "# Installed with \`pip install -c constraints.txt ...\` by \`make venv\` and the Dockerfile."
    echo "# Regenerate with \`make lock\` after changing pyproject.toml's dependencies."
    "$1" freeze --exclude-editable | LC_ALL=C sort -f
  } >constraints.txt.tmp
  mv -f constraints.txt.tmp constraints.txt
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
python3 -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install --quiet --upgrade pip
"$scratch/venv/bin/pip" install --quiet -e '.[dev]'
write_constraints "$scratch/venv/bin/pip"
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) packages)"

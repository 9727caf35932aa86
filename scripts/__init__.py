"""Developer tools run from a checkout (``python -m scripts.NAME``): not part of the package."""

"""Case tables: YAML files of titled cases, one loader, one test per table."""

from pathlib import Path

import yaml

HERE = Path(__file__).parent


def load_cases(name: str) -> list[dict]:
    with open(HERE / name) as fh:
        return yaml.safe_load(fh)

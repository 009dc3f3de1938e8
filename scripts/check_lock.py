"""Fails if a uv.lock holds what a deploy target cannot install from: local paths,
extra indexes or an exclude-newer cut-off. Used by scripts/relock and the tests."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def lock_problems(lock_path: Path) -> list[str]:
    lock = tomllib.loads(lock_path.read_text())
    problems = []
    if "exclude-newer" in lock.get("options", {}):
        problems.append("options.exclude-newer is set")
    registries = set()
    for package in lock.get("package", []):
        source = package.get("source", {})
        if package.get("name") == "agent-server":
            continue  # the app itself
        if "registry" not in source:
            problems.append(f"{package['name']} comes from {source}, not a registry")
        else:
            registries.add(source["registry"])
    if len(registries) > 1:
        problems.append(f"more than one index: {sorted(registries)}")
    if any(not url.startswith("https://") for url in registries):
        problems.append(f"an index that is not an https URL: {sorted(registries)}")
    return problems


if __name__ == "__main__":
    found = lock_problems(Path(sys.argv[1]))
    for problem in found:
        print(f"{sys.argv[1]}: {problem}", file=sys.stderr)
    sys.exit(1 if found else 0)

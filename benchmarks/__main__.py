"""Run every benchmark in this folder in turn: `python -m benchmarks` (or `make bench`)."""

import importlib
import pkgutil
import sys
from pathlib import Path


# long reliability runs (30-minute soak, 100 000-message fuzz): run them on their own, by name
SEPARATE_RUNS = {"soak", "fuzz_server", "reliability_figures"}


def main() -> int:
    folder = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(folder)])
                   if not m.name.startswith("_") and m.name not in SEPARATE_RUNS)
    print("not run here (long; run by name): " + ", ".join(f"python -m benchmarks.{name}" for name in sorted(SEPARATE_RUNS)))
    failures = 0
    for name in names:
        print(f"\n=== benchmarks.{name} ===", flush=True)
        try:
            importlib.import_module(f"benchmarks.{name}").main([])
        except Exception as error:  # one broken benchmark must not hide the others' numbers
            failures += 1
            print(f"benchmarks.{name} failed: {type(error).__name__}: {error}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

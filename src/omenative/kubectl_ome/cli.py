"""Entry point of the `kubectl-ome` plugin."""

from __future__ import annotations

import argparse
import sys

from omenative import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kubectl ome", description="Inspect OMENative InferenceServices.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the plugin version")
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"kubectl-ome {__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

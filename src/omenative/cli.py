"""The `omenative` command."""

from __future__ import annotations

import argparse
import sys

from omenative import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omenative", description="Runs OME InferenceServices on OMENative.")
    parser.add_argument("--version", action="version", version=f"omenative {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "version":
        print(f"omenative {__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `tinyprop` command. Each verb lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import TinypropError

# verb -> module under tinyprop.commands; each module has add_parser(subparsers) and run(args).
VERBS = {
    "convert": "convert",
    "infer": "infer",
    "train": "train",
    "eval": "evaluate",
    "export": "export",
    "monitor": "monitor",
    "report": "report",
    "flash": "flash",
    "bench": "bench",
    "demo": "demo",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tinyprop",
        description="Train int8 TFLite models on microcontrollers (sparse update, in place).",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for module in VERBS.values():
        try:
            mod = importlib.import_module(f"tinyprop.commands.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"tinyprop.commands.{module}":
                raise
            continue
        mod.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except TinypropError as exc:
        print(f"tinyprop {args.verb}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:  # `tinyprop train ... | head`: the reader left, nothing is wrong
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print(f"tinyprop {args.verb}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())

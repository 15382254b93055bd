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
    "fetch": "fetch",
    "demo": "demo",
    "learn": "learn",
    "fleet": "fleet",
    "package": "package",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tinyprop",
        description="Train int8 TFLite models on microcontrollers (sparse update, in place).",
    )
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    sub.required = True
    for verb, module in VERBS.items():
        name = f"tinyprop.commands.{module}"
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # a registered verb without its module: a broken install
                raise RuntimeError(f"tinyprop.cli.VERBS registers '{verb}', but {name} does "
                                   "not exist") from exc
            raise
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

"""tinyprop package: the C library as an Arduino library, an ESP-IDF component or a PlatformIO
library, assembled from the sources tinyprop builds its boards from."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "package", help="write the library for Arduino, ESP-IDF or PlatformIO",
        description="Write KIND's package of the tinyprop C library into the folder DIR: "
        "arduino (a library for the Arduino IDE and arduino-cli, with examples), esp-idf (a "
        "component with an example project) or platformio (what the registry publishes). "
        "docs/packages.md says how to install each.")
    p.add_argument("kind", metavar="KIND", help="arduino, esp-idf or platformio")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                   help="the package's folder (new or empty)")
    p.add_argument("--zip", action="store_true",
                   help="also write DIR.zip, one top folder inside (what Arduino's \"Add .ZIP "
                   "Library\" takes)")
    p.add_argument("--force", action="store_true",
                   help="replace a package this command wrote in DIR before")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..packaging import assemble

    pkg = assemble(args.kind, args.output, zip_it=args.zip, force=args.force)
    print(f"wrote {pkg.folder}: the {pkg.kind} package, {pkg.files} files "
          f"({pkg.sources} C/C++ sources)")
    if pkg.zip_path is not None:
        print(f"wrote {pkg.zip_path}")
    return 0

"""``python -m certification``: run the SDK certification matrix, compare it with expected.yaml, write
MATRIX.md and matrix.json (and, with --readme, the README's table). Exit 1 when a cell differs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from certification.matrix import (
    EXPECTED_FILE,
    JSON_FILE,
    MARKDOWN_FILE,
    load_expected,
    rewrite_readme,
    run,
    write,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m certification", description=__doc__)
    parser.add_argument("--connector", action="append", metavar="NAME",
                        help="only this connector (repeatable; default: every one in expected.yaml)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="cells run in parallel (default 2)")
    parser.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                        help="where failed cells keep their evidence (default ./evidence)")
    parser.add_argument("--markdown", type=Path, default=MARKDOWN_FILE, help=f"default {MARKDOWN_FILE.name}")
    parser.add_argument("--json", type=Path, default=JSON_FILE, dest="json_file", help=f"default {JSON_FILE.name}")
    parser.add_argument("--readme", action="store_true", help="also rewrite the README's table from expected.yaml")
    args = parser.parse_args(argv)

    connectors = load_expected()
    unknown = sorted(set(args.connector or ()) - set(connectors))
    if unknown:
        parser.error(f"unknown connector(s) {', '.join(unknown)}; valid: {', '.join(connectors)}")
    chosen = [c for name, c in connectors.items() if not args.connector or name in args.connector]
    result = run(chosen, args.evidence_dir, jobs=args.jobs)
    write(result, connectors, args.markdown, args.json_file)
    if args.readme:
        rewrite_readme(connectors)
    differences = result.differences()
    print(f"{len(result.cells)} cells in {result.seconds:.1f} s; wrote {args.markdown} and {args.json_file}")
    for line in differences:
        print(f"  differs from {EXPECTED_FILE.name}: {line}")
    print(f"{len(result.cells) - len(differences)} as expected, {len(differences)} differ")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())

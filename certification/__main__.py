"""``python -m certification``: run the SDK certification matrix, compare it with expected.yaml, write
MATRIX.md and matrix.json (and, with --readme, the tables of docs/matrix.md, which the README links to); the
framework agents' cells too (MATRIX.md's framework section), and the durable-engine rows (certification/durable.py).
Exit 1 when a cell differs."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from packaging.utils import canonicalize_name

from certification.environments import Environment, EnvironmentError_, environment, parse, pinned
from certification.matrix import (
    FRAMEWORK_PACKAGES,
    JSON_FILE,
    MARKDOWN_FILE,
    CellOutcome,
    Connector,
    FrameworkAgent,
    framework_difference,
    framework_table,
    frameworks_json,
    frameworks_markdown,
    load_expected,
    load_frameworks,
    observed,
    pivot_table,
    rewrite_readme,
    rewrite_readme_frameworks,
    run,
    run_frameworks,
    said_differences,
    write,
)
from certification.npm import PREFIX, NodeEnvironment, is_npm, npm_environment, parse_npm


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m certification", description=__doc__)
    parser.add_argument("--connector", action="append", metavar="NAME",
                        help="only this connector (repeatable; default: every one in expected.yaml)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="cells run in parallel (default 2)")
    parser.add_argument("--evidence-dir", type=Path, default=Path("evidence"),
                        help="where failed cells keep their evidence (default ./evidence)")
    parser.add_argument("--markdown", type=Path, default=MARKDOWN_FILE, help=f"default {MARKDOWN_FILE.name}")
    parser.add_argument("--json", type=Path, default=JSON_FILE, dest="json_file", help=f"default {JSON_FILE.name}")
    parser.add_argument("--framework", action="append", metavar="AGENT|NAME==VERSION",
                        help="only this framework agent (repeatable; default: every one in expected.yaml); or a "
                             "framework at a release, NAME==VERSION (NAME for the newest): its agents run in an "
                             "environment made for it (uv; cached) and the table is printed, the published files "
                             "left as they are")
    parser.add_argument("--readme", action="store_true",
                        help="also rewrite the tables of docs/matrix.md from expected.yaml")
    parser.add_argument("--sdk", action="append", metavar="REQUIREMENT",
                        help="certify this release of an SDK: NAME==VERSION, or NAME for the newest (repeatable; an "
                             "npm package: npm:NAME@VERSION or npm:NAME); its connectors run in an environment made "
                             "for it (uv, or npm on a Node made here; cached), and the table is printed, the "
                             "published files left as they are")
    args = parser.parse_args(argv)
    columns, framework_agents = load_frameworks()
    releases = [f for f in args.framework or () if f not in framework_agents]  # the rest name agents
    if args.sdk and releases:
        parser.error("give --sdk or a --framework release, not both (each runs its own environments)")
    if args.sdk:
        return certify_sdks(parser, args)
    if releases:
        return certify_frameworks(parser, args, releases)

    connectors = load_expected()
    unknown = sorted(set(args.connector or ()) - set(connectors))
    if unknown:
        parser.error(f"unknown connector(s) {', '.join(unknown)}; valid: {', '.join(connectors)}")
    # --connector alone runs no framework agent, --framework alone no connector; neither: everything
    chosen = [c for name, c in connectors.items()
              if (not args.connector and not args.framework) or name in (args.connector or ())]
    agents = [a for name, a in framework_agents.items()
              if (not args.connector and not args.framework) or name in (args.framework or ())]
    try:  # every environment made here, before the cells' processes: one that cannot be made is one line
        chosen, agents = [c.ready() for c in chosen], [a.ready() for a in agents]
    except EnvironmentError_ as exc:
        print(f"python -m certification: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result = run(chosen, args.evidence_dir, jobs=args.jobs)
    frameworks = run_frameworks(agents, columns, args.evidence_dir, jobs=args.jobs)
    write(result, connectors, args.markdown, args.json_file)
    if frameworks:
        with args.markdown.open("a", encoding="utf-8") as f:
            f.write("\n".join(frameworks_markdown(columns, frameworks)) + "\n")
        published = json.loads(args.json_file.read_text(encoding="utf-8"))
        published["frameworks"] = frameworks_json(frameworks)
        args.json_file.write_text(json.dumps(published, indent=1) + "\n", encoding="utf-8")
    if args.readme:
        rewrite_readme(connectors)
        rewrite_readme_frameworks(columns, framework_agents)
    differences = result.differences() + [d for a, c, cell in frameworks
                                           if (d := framework_difference(a, c, cell)) is not None]
    cells = len(result.cells) + len(frameworks)
    if not args.connector and not args.framework:  # the durable-engine rows too (their own sections of both files)
        from certification import durable

        durable_columns, durable_agents = durable.load_durable()
        engines = durable.run_durable(list(durable_agents.values()), durable_columns, args.evidence_dir)
        durable.publish(durable_columns, engines, args.markdown, args.json_file)
        differences += [d for a, c, cell in engines if (d := durable.durable_difference(a, c, cell)) is not None]
        cells += len(engines)
    print(f"{cells} cells in {time.perf_counter() - started:.1f} s; wrote {args.markdown} and {args.json_file}")
    return said_differences(cells, differences)


def certify_sdks(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """``--sdk``: each requirement's connectors in its own environment; their table, and how it differs from
    the published expectations (exit 1 then, as for the whole matrix)."""
    connectors = load_expected()
    packages = {c.package for c in connectors.values()}
    chosen: list[Connector] = []
    for requirement in args.sdk:
        try:
            npm = is_npm(requirement)
            name = f"{PREFIX}{parse_npm(requirement)[0]}" if npm else canonicalize_name(parse(requirement).name)
            if name not in packages:
                parser.error(f"--sdk {requirement}: no connector certifies {name}; "
                             f"valid: {', '.join(sorted(packages))}")
            print(f"making the environment for {requirement} ({'npm' if npm else 'uv'}; cached once made)...",
                  flush=True)
            made: Environment | NodeEnvironment
            if npm:  # with the other packages its connectors need, at their certified releases
                companions = next(c.companions for c in connectors.values() if c.package == name)
                made = npm_environment([requirement, *companions])
            else:
                made = environment(requirement)
        except EnvironmentError_ as exc:
            print(f"python -m certification: {exc}", file=sys.stderr)
            return 2
        chosen += [c.in_environment(made) for c in connectors.values() if c.package == name]
    started = time.perf_counter()
    result = run(chosen, args.evidence_dir, jobs=args.jobs)
    rows: dict[str, tuple[Connector, dict[str, CellOutcome]]] = {}
    for c, f, cell in result.cells:
        rows.setdefault(c.name, (c, {}))[1][f] = observed(cell)
    print("\n".join(pivot_table(list(rows.values()))))
    differences = result.differences()
    print(f"\n{len(result.cells)} cells in {time.perf_counter() - started:.1f} s")
    return said_differences(len(result.cells), differences, "as published")


def certify_frameworks(parser: argparse.ArgumentParser, args: argparse.Namespace, releases: list[str]) -> int:
    """``--framework NAME==VERSION``: that framework's agents (those named too, if any are) on that release, the
    other packages of its certified set as expected.yaml has them; their table, and how it differs from the
    published expectations (exit 1 then, as for the whole matrix). expected.yaml is read, never edited."""
    columns, agents = load_frameworks()
    frameworks = {canonicalize_name(f): f for f in FRAMEWORK_PACKAGES} | {
        canonicalize_name(package): f for f, package in FRAMEWORK_PACKAGES.items()}
    named = [a for a in args.framework if a in agents]
    released = {canonicalize_name(found[0]) for f in releases if (found := re.match(r"[A-Za-z0-9._-]+", f))}
    stray = [a for a in named if not {canonicalize_name(agents[a].framework),
                                      canonicalize_name(agents[a].package)} & released]
    if stray:
        parser.error(f"--framework {', '.join(stray)}: not an agent of the framework given a release "
                     f"({', '.join(releases)})")
    chosen: list[FrameworkAgent] = []
    for requirement in releases:
        try:
            given = parse(requirement, "--framework").name
            name = canonicalize_name(given)
            if name not in frameworks:
                parser.error(f"--framework {requirement}: neither an agent nor a framework of expected.yaml; valid "
                             f"agents: {', '.join(agents)}; valid frameworks: {', '.join(FRAMEWORK_PACKAGES)} (or "
                             "their packages), as NAME==VERSION or NAME for the newest")
            framework = frameworks[name]
            exact = pinned(requirement.replace(given, FRAMEWORK_PACKAGES[framework], 1))  # pydantic-ai: its package
            print(f"making the environment for {exact} beside the harness (uv; cached once made)...", flush=True)
            members = [a for a in agents.values() if a.framework == framework and (not named or a.name in named)]
            chosen += [a.at(exact.split("==", 1)[1]).ready() for a in members]
        except EnvironmentError_ as exc:
            print(f"python -m certification: {exc}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    result = run_frameworks(chosen, columns, args.evidence_dir, jobs=args.jobs)
    rows: dict[str, tuple[FrameworkAgent, dict[str, CellOutcome]]] = {}
    for a, c, cell in result:
        rows.setdefault(a.name, (a, {}))[1][c.name] = observed(cell)
    print("\n".join(framework_table(columns, list(rows.values()))))
    differences = [d for a, c, cell in result if (d := framework_difference(a, c, cell)) is not None]
    print(f"\n{len(result)} cells in {time.perf_counter() - started:.1f} s")
    return said_differences(len(result), differences, "as published")


if __name__ == "__main__":
    sys.exit(main())

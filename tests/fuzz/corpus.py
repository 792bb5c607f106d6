"""Hostile scenario files, generated from a seed: mutations of the bundled catalogue.

`cases(seed, n)` yields `(label, bytes)` pairs, the same for the same seed, so a failure in CI names a
case that reproduces with `python benchmarks/fuzz_scenarios.py --seed S --cases N`. Each mutator
takes one bundled scenario (its text and its parsed data) and a `random.Random`, and returns the
bytes of a file that a person or a program could plausibly hand to the loader.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from harness.resources import catalogue_dir

CATALOGUE = catalogue_dir()


@dataclass(frozen=True)
class Seed:
    """One bundled scenario: the file's text and its parsed data."""

    name: str
    text: str
    data: dict[str, Any]


def seeds() -> list[Seed]:
    out = []
    for path in sorted(CATALOGUE.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        out.append(Seed(path.stem, text, yaml.safe_load(text)))
    return out


# -- where to aim: every key path of a scenario ------------------------------------------------------

def key_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside `value` (mapping keys and list indices), outermost first."""
    paths: list[tuple[Any, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        paths.append(prefix + (key,))
        paths.extend(key_paths(child, prefix + (key,)))
    return paths


def _replace(data: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(data, dict):
        return {**data, head: _replace(data[head], rest, new)}
    copy = list(data)
    copy[head] = _replace(copy[head], rest, new)
    return copy


def _delete(data: Any, path: tuple[Any, ...]) -> Any:
    head, rest = path[0], path[1:]
    if rest:
        copy = dict(data) if isinstance(data, dict) else list(data)
        copy[head] = _delete(data[head], rest)
        return copy
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if k != head}
    return [v for i, v in enumerate(data) if i != head]


ODD_VALUES: list[Any] = [
    None, True, False, 0, -1, 10**30, -(10**19), 1.5, float("inf"), float("-inf"), float("nan"),
    "", " ", "x" * 5000, "\0", "\ud800", "a\udfffb", "\x85\u2028", "🙂" * 50, "../../etc/passwd",
    "${HOME}", "'; rm -rf /", "%s%s%n", "2001-13-45", "0x10", "1e9999", [], {}, [[]], [None],
    {"": None}, {"a": {"b": {"c": []}}}, list(range(50)), {str(i): i for i in range(30)},
    "reverse", "forward-https", "drop_request", "synthetic_status", 100, 101, 199, 600, 999,
    "python -m harness.agents.reference", "\\", "'unclosed", "n" * 300,
]


def _dump(data: Any) -> bytes:
    # allow_unicode=False: non-ASCII (lone surrogates too) is written as \u escapes, which YAML reads
    # back as the same code points
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=False, width=1000).encode("ascii")


# -- the mutators -------------------------------------------------------------------------------------

Mutator = Callable[[Seed, random.Random], bytes]


def odd_value(seed: Seed, rng: random.Random) -> bytes:
    path = rng.choice(key_paths(seed.data))
    return _dump(_replace(seed.data, path, rng.choice(ODD_VALUES)))


def missing_key(seed: Seed, rng: random.Random) -> bytes:
    return _dump(_delete(seed.data, rng.choice(key_paths(seed.data))))


def unknown_key(seed: Seed, rng: random.Random) -> bytes:
    mappings = [p for p in [(), *key_paths(seed.data)] if isinstance(_get(seed.data, p), dict)]
    path = rng.choice(mappings)
    target = _get(seed.data, path)
    typo = rng.choice([*target, "x"]) if target else "x"
    return _dump(_replace(seed.data, path, {**target, typo + rng.choice(["s", "_", "z", ""]) + "_": 1}))


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def byte_flips(seed: Seed, rng: random.Random) -> bytes:
    raw = bytearray(seed.text.encode())
    for _ in range(rng.randint(1, 6)):
        raw[rng.randrange(len(raw))] = rng.randrange(256)
    return bytes(raw)


def truncation(seed: Seed, rng: random.Random) -> bytes:
    raw = seed.text.encode()
    return raw[:rng.randrange(len(raw))]


def non_utf8(seed: Seed, rng: random.Random) -> bytes:
    raw = seed.text.encode()
    at = rng.randrange(len(raw))
    junk = rng.choice([b"\xff", b"\xfe\xfe", b"\xc3", b"\xed\xa0\x80", b"\x80abc", "é".encode("latin-1")])
    encoded = rng.choice([raw[:at] + junk + raw[at:], seed.text.encode("utf-16"), seed.text.encode("cp1252")])
    return encoded


def control_characters(seed: Seed, rng: random.Random) -> bytes:
    text = seed.text
    at = rng.randrange(len(text))
    junk = rng.choice(["\0", "\x01", "\x1b[31m", "\t", "\r", "\ufeff", "\x7f", "\ud7ff", "\ufffe"])
    return (text[:at] + junk + text[at:]).encode("utf-8", "surrogatepass")


def deep_nesting(seed: Seed, rng: random.Random) -> bytes:
    depth = rng.choice([10, 63, 64, 65, 100, 600, 1000, 5000])
    opener, closer = rng.choice([("[", "]"), ("{a: ", "}")])
    nested = opener * depth + "1" + closer * depth
    path = rng.choice(key_paths(seed.data))
    marker = "__NESTED__"
    return _dump(_replace(seed.data, path, marker)).replace(marker.encode(), nested.encode())


def block_nesting(seed: Seed, rng: random.Random) -> bytes:
    depth = rng.choice([30, 70, 400])
    lines = "".join(f"{' ' * i}k{i}:\n" for i in range(depth)) + " " * depth + "v\n"
    return (seed.text + "x_deep:\n" + "".join(" " + line for line in lines.splitlines(keepends=True))).encode()


def alias_bomb(seed: Seed, rng: random.Random) -> bytes:
    width, levels = rng.choice([(10, 4), (10, 6), (10, 9), (2, 40), (100, 3), (3, 16)])
    lines = [f"  l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    where = rng.choice(["params", "agent", "description", "bomb"])
    body = "\n".join(lines)
    if where == "params":
        marker = "__BOMB__"
        paths = [p for p in key_paths(seed.data) if p[-1] == "params"] or [("intents", 0, "params")]
        text = _dump(_replace(seed.data, paths[0], marker)).decode()
        return text.replace(f"'{marker}'", "\n" + "\n".join("    " + line for line in lines)).replace(
            marker, "\n" + body).encode()
    return (seed.text + f"x_defs:\n{body}\n{where}: *l{levels - 1}\n").encode()


def circular_alias(seed: Seed, rng: random.Random) -> bytes:
    form = rng.choice(["&r [*r]", "&r {a: *r}", "&r [1, {k: [*r]}]", "*undefined", "&r 1", "&r [&r 1, *r]"])
    path = rng.choice(key_paths(seed.data))
    marker = "__ALIAS__"
    return _dump(_replace(seed.data, path, marker)).replace(marker.encode(), form.encode())


def huge_number(seed: Seed, rng: random.Random) -> bytes:
    digits = rng.choice([20, 100, 101, 4300, 4301, 100_000])
    number = rng.choice(["", "-", "+", "0x", "0o", "0b"]) + "7" * digits
    number = rng.choice([number, f"1e{digits}", f"{'9' * digits}.5", "1_" * (digits // 2) + "1", "1:" * 50 + "1"])
    path = rng.choice(key_paths(seed.data))
    marker = "__NUMBER__"
    return _dump(_replace(seed.data, path, marker)).replace(f"'{marker}'".encode(), number.encode()).replace(
        marker.encode(), number.encode())


def duplicate_key(seed: Seed, rng: random.Random) -> bytes:
    lines = seed.text.splitlines(keepends=True)
    keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith(("#", "-"))]
    i = rng.choice(keyed)
    return "".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]).encode()


def yaml_tags(seed: Seed, rng: random.Random) -> bytes:
    tag = rng.choice(["!!python/object/apply:os.system ['true']", "!!binary 'not base64!'", "!!timestamp 2001-13-45",
                      "!!set {a, b}", "!!int 'abc'", "!!float 'x'", "!!omap [a: 1, a: 2]", "!custom 1",
                      "!!str", "!!null 'x'", "!!bool maybe", "!!merge 1", "!!timestamp 2001-02-30"])
    path = rng.choice(key_paths(seed.data))
    marker = "__TAG__"
    return _dump(_replace(seed.data, path, marker)).replace(marker.encode(), tag.encode())


def documents(seed: Seed, rng: random.Random) -> bytes:
    raw = seed.text.encode()
    return rng.choice([b"", b"---\n", b"...\n", b"--- |\n  text\n", raw + b"\n---\n" + raw, b"[]", b"42", b"~",
                       b"%YAML 1.1\n---\n" + raw, b"%TAG ! tag:x,2000:\n--- a\n", b"\xef\xbb\xbf" + raw,
                       raw.replace(b"\n", b"\r\n")])


MUTATORS: dict[str, Mutator] = {f.__name__: f for f in [
    odd_value, missing_key, unknown_key, byte_flips, truncation, non_utf8,
    control_characters, deep_nesting, block_nesting, alias_bomb, circular_alias, huge_number,
    duplicate_key, yaml_tags, documents]}
# odd values and byte flips weigh more: they reach every key path and every byte
WEIGHTS = [3 if name in ("odd_value", "byte_flips") else 1 for name in MUTATORS]


def cases(seed: int, n: int) -> Iterator[tuple[str, bytes]]:
    """`n` hostile files from `seed`: (label 'NNNN-mutator-scenario', content)."""
    rng = random.Random(seed)
    catalogue = seeds()
    names = list(MUTATORS)
    for i in range(n):
        base = rng.choice(catalogue)
        name = rng.choices(names, WEIGHTS)[0]
        yield f"{i:04d}-{name}-{base.name}", MUTATORS[name](base, random.Random(rng.getrandbits(64)))

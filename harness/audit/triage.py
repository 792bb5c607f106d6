"""The audit's triage in SQL: which operations no rule can fire on (their verdict is written from SQL), and
which lines the rules must read (``harness.checker``, the one implementation of the rules).

Two statements, run by either engine (``harness.audit.engines``):

- ``FEATURES_SQL`` turns each line of the view ``lines(line, text)`` into typed columns: its operation, its
  event, the fields the clean stories read, and ``ok``, whether the line is one the rules would read exactly
  as SQL reads it (valid JSON that orjson accepts too, the event's fields of the model's own types, no escape
  or float where SQL and Python could differ). It is DuckDB SQL and always runs on DuckDB: in this process
  for the embedded engine, in every Spark executor over an Arrow batch (``features_of_batch``) for Spark.
- ``TRIAGE_SQL`` (portable: it runs unchanged on DuckDB and on Spark SQL) groups the features by operation
  and keeps the clean ones: every line ``ok``, one of the clean stories of ``harness.audit.fast_path``
  (ours) or the article's clean story, and nothing that ties the operation to another one (a key or an
  intent another operation uses, a reference to or from it, a line that may hold a secret). ``CLEAN_SQL``
  gives their verdicts, written in SQL; ``ROUTED_SQL`` the numbers of every other line, in file order, for
the rules (the engine reads their text: ``lines_at``).

A line SQL cannot read for certain (``kind = 'loose'``: not JSON to DuckDB, duplicate keys, an escaped
operation id) is read first by the audit itself (``harness.audit.engines``), and whatever it names is
``forced`` through the rules. SQL may send an operation to the rules that needs no rule; it must never
call one clean that a rule would fault. The differential tests (tests/audit/test_triage.py) hold each
clean verdict equal to ``judge_operation``'s on generated logs, and the whole output equal to the
streaming audit's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from harness.audit.article import NOT_SENT_WORDS, UNKNOWN_WORDS
from harness.checker.context import SAFE_METHODS
from harness.checker.secrets import SECRET_HINTS
from harness.events import (
    BOOL_OR_NONE,
    DICT_OR_NONE,
    FLOAT_OR_NONE,
    INT_OR_NONE,
    RETRY_REASONS,
    STR,
    STR_OR_NONE,
    STRS_OR_NONE,
    TS,
    VOUCH_PLANS,
)


def quote(value: str) -> str:
    """``value`` as an SQL string literal (the engines quote the files they read with it)."""
    return "'" + value.replace("'", "''") + "'"


def _in_list(values: Any) -> str:
    return "(" + ", ".join(quote(v) for v in sorted(values)) + ")"


# -- FEATURES_SQL (DuckDB) ------------------------------------------------------------------------------------
# Every field any event's model knows, and the few others the clean stories read; one json_transform parses
# the line once and gives each as its JSON text (re-written compactly by DuckDB), NULL when absent or null.
_EXTRA_READ = ("exit_status", "type", "operationId", "attemptId", "idempotencyKey", "payloadHash", "result",
               "effectRef", "observedAt")
FIELDS: tuple[str, ...] = tuple(dict.fromkeys(
    [name for plan, _ in VOUCH_PLANS.values() for name in plan] + list(_EXTRA_READ)))
_STRUCT = "{" + ", ".join(f'"{name}": "JSON"' for name in FIELDS) + "}"
_SAFE_INT = 9007199254740992  # 2**53: the integers SQL and Python compare alike
_INT = "-?[0-9]{1,15}"
_FLOAT = r"-?[0-9]+(\.[0-9]+([eE][-+]?[0-9]+)?|[eE][-+]?[0-9]+)"  # what orjson reads as a (finite) float
_STRINGS = r'\[("[^"]*"(,"[^"]*")*)?\]'  # a list of strings, compact (no escape in a plain line)
_ISO = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?(Z|\+00:00)"


def _r(name: str) -> str:
    return f"j['{name}']"


def _type_ok(check: Any, r: str) -> str:
    """A field's check (``harness.events.VOUCH_PLANS``) as SQL over its JSON text ``r`` (NULL: absent or null)."""
    if isinstance(check, frozenset):  # a Literal: one of these strings
        return f"(starts_with({r}, '\"') AND substr({r}, 2, length({r}) - 2) IN {_in_list(check)})"
    return {
        STR: f"starts_with({r}, '\"')",
        STR_OR_NONE: f"({r} IS NULL OR starts_with({r}, '\"'))",
        INT_OR_NONE: f"({r} IS NULL OR regexp_full_match({r}, '{_INT}'))",
        BOOL_OR_NONE: f"({r} IS NULL OR {r} IN ('true', 'false'))",
        FLOAT_OR_NONE: f"({r} IS NULL OR regexp_full_match({r}, '{_FLOAT}'))",
        # a string only in the one form SQL reads as a time; any other goes to the rules, which read it as Python does
        TS: f"(regexp_full_match({r}, '{_FLOAT}') OR regexp_full_match({r}, '\"{_ISO}\"'))",
        STRS_OR_NONE: f"({r} IS NULL OR regexp_full_match({r}, '{_STRINGS}'))",
        # free-form data: no float (orjson and pydantic read those differently), no NaN, two levels of
        # objects at most and their keys distinct (so no duplicate key can hide), no deep lists
        DICT_OR_NONE: f"({r} IS NULL OR (starts_with({r}, '{{') AND _plain_object({r})))",
    }[check]


def _vouch_sql(event: str) -> str:
    """The line fits the event's model as it stands (``harness.events.vouch_for``)."""
    plan, required = VOUCH_PLANS[event]
    tests = [f"{_r(name)} IS NOT NULL" for name in sorted(required)]
    tests += [_type_ok(check, _r(name)) for name, check in plan.items()]
    return " AND ".join(tests)


def _s(name: str) -> str:
    """A string field's value, NULL when absent or null. A plain line has no escape, so no string holds a quote;
    a value of another type comes out as its JSON text, which only an ``ok`` line (its types vouched for) is
    judged on, and which at worst sends more operations to the rules."""
    return f"trim({_r(name)}, '\"')"


def _i(name: str) -> str:
    return f"CASE WHEN regexp_full_match({_r(name)}, '{_INT}') THEN CAST({_r(name)} AS BIGINT) END"


def _b(name: str) -> str:
    return f"CASE WHEN {_r(name)} IN ('true', 'false') THEN {_r(name)} END"


def _ts(name: str) -> str:
    """A timestamp as Unix seconds, as ``ts_value`` reads it: a float, or an RFC 3339 string in UTC; NULL for
    anything else (no clean story then)."""
    r = _r(name)
    return (f"CASE WHEN regexp_full_match({r}, '{_FLOAT}') THEN CAST({r} AS DOUBLE) "
            f"WHEN regexp_full_match({r}, '\"{_ISO}\"') THEN epoch_us(CAST(replace(substr({r}, 2, length({r}) - 2), "
            f"'Z', '+00:00') AS TIMESTAMPTZ)) / 1000000.0 END")


def _list(name: str, what: str) -> str:
    r = _r(name)
    return {"n": f"coalesce(json_array_length({r}), 0)",
            "nd": f"coalesce(len(list_distinct(CAST(json_extract_string({r}, '$[*]') AS VARCHAR[]))), 0)",
            "1": f"json_extract_string({r}, '$[0]')", "2": f"json_extract_string({r}, '$[1]')",
            "3": f"json_extract_string({r}, '$[2]')"}[what]


FEATURES_COLUMNS = (
    ("line", "BIGINT"), ("kind", "VARCHAR"), ("op", "VARCHAR"), ("event", "VARCHAR"), ("ok", "BOOLEAN"),
    ("hint", "BOOLEAN"), ("attempt_id", "VARCHAR"), ("idem_key", "VARCHAR"), ("fp", "VARCHAR"),
    ("prior_fp", "VARCHAR"), ("dispatch_state", "VARCHAR"), ("http_status", "BIGINT"), ("no_status", "BOOLEAN"),
    ("exit_zero", "BOOLEAN"), ("retry_of", "VARCHAR"), ("retry_reason", "VARCHAR"), ("budget", "BIGINT"),
    ("safe_method", "BOOLEAN"), ("observation_id", "VARCHAR"), ("source", "VARCHAR"), ("found", "VARCHAR"),
    ("lag_possible", "VARCHAR"), ("state", "VARCHAR"), ("reason", "VARCHAR"), ("correction_id", "VARCHAR"),
    ("refers", "BOOLEAN"), ("ref1", "VARCHAR"), ("ref2", "VARCHAR"), ("ref3", "VARCHAR"), ("ref4", "VARCHAR"),
    ("intent_id", "VARCHAR"), ("intent_json", "VARCHAR"), ("scope", "VARCHAR"), ("ts", "DOUBLE"),
    ("ev_n", "BIGINT"), ("ev1", "VARCHAR"), ("ev2", "VARCHAR"), ("ev3", "VARCHAR"), ("ev_json", "VARCHAR"),
    ("ef_n", "BIGINT"), ("ef_nd", "BIGINT"), ("ef1", "VARCHAR"), ("ef_json", "VARCHAR"),
)
_SPARK_TYPES = {"BIGINT": "BIGINT", "VARCHAR": "STRING", "BOOLEAN": "BOOLEAN", "DOUBLE": "DOUBLE"}
FEATURES_DDL = ", ".join(f"{name} {_SPARK_TYPES[kind]}" for name, kind in FEATURES_COLUMNS)

_HINT = " OR ".join(f"text ILIKE '%{hint}%'" for hint in SECRET_HINTS)
# Python reads the key count of a line from orjson's dict, SQL from the text: the same when the line is compact
# (no space after a quote), holds no null and no field of its own. Otherwise the keys are listed and compared.
_KEYS_IN_TEXT = "(length(text) - length(replace(text, '\":', ''))) // 2"
_KEYS_READ = " + ".join(f"({_r(name)} IS NOT NULL)::INT" for name in FIELDS)
_EVENT_OK = " ".join(f"WHEN {quote(event)} THEN {_vouch_sql(event)}" for event in VOUCH_PLANS)
_ARTICLE_OK = (f"{_s('operationId')} <> '' AND CASE {_s('type')} "
               f"WHEN 'attempt' THEN coalesce({_s('attemptId')}, '') <> '' "
               f"AND ({_r('idempotencyKey')} IS NULL OR starts_with({_r('idempotencyKey')}, '\"')) "
               f"AND ({_r('payloadHash')} IS NULL OR starts_with({_r('payloadHash')}, '\"')) "
               f"AND ({_r('result')} IS NULL OR regexp_full_match({_r('result')}, '\"[ -~]*\"')) "
               f"ELSE coalesce({_s('effectRef')}, '') <> '' END")
_RESULT = f"lower(coalesce({_s('result')}, ''))"
_DISPATCH = (f"CASE WHEN fmt = 'event' THEN {_s('dispatch_state')} WHEN {_s('type')} = 'attempt' THEN "
             f"CASE WHEN {_RESULT} IN {_in_list(NOT_SENT_WORDS)} THEN 'not_sent' "
             f"WHEN {_RESULT} IN {_in_list(UNKNOWN_WORDS)} THEN 'sent_no_response' ELSE 'response_received' END END")


def _loose_row() -> str:
    """A line SQL cannot read for certain: its number, whether it may hold a secret, nothing else."""
    given = {"line": "line", "kind": "'loose'", "ok": "false", "hint": "hint", "exit_zero": "true",
             "no_status": "true", "safe_method": "false", "refers": "false", "ev_n": "0", "ef_n": "0", "ef_nd": "0"}
    return ", ".join(f"{given.get(name, 'NULL')} AS {name}" for name, _ in FEATURES_COLUMNS)


FEATURES_SQL = f"""
WITH given AS MATERIALIZED (
  SELECT line, text, ({_HINT}) AS hint,
         -- what a plain line is: no escape (so SQL reads its strings as Python does), no byte-order mark, no
         -- U+FFFD (what Spark's reader makes of a byte that is not UTF-8: the rules read the file's own line)
         instr(text, '\\') = 0 AND instr(text, chr(65279)) = 0 AND instr(text, chr(65533)) = 0 AS plain,
         CASE WHEN starts_with(text, '{{') THEN try(json_transform(text, '{_STRUCT}')) END AS j
  FROM lines
  -- a blank line (as Python's str.strip() sees one, or less) is no line at all
  WHERE text IS NOT NULL
    AND (starts_with(text, '{{') OR trim(text, chr(32) || chr(9) || chr(11) || chr(12)) <> '')
), read AS (
  SELECT *,
         CASE WHEN j IS NULL THEN NULL WHEN j['event'] IS NOT NULL THEN 'event'
              WHEN j['type'] IN ('"attempt"', '"effect"') THEN 'article' END AS fmt
  FROM given
), counted AS (
  SELECT *,
         CASE WHEN fmt = 'event' THEN {_s('operation_id')} WHEN fmt = 'article' THEN {_s('operationId')} END AS op_id,
         -- every key one of the fields read, none twice, no null: then the keys are distinct and the line
         -- holds nothing beyond what the field checks vouch for
         fmt IS NOT NULL AND plain AND instr(text, '" ') = 0 AND instr(text, 'null') = 0
           AND {_KEYS_IN_TEXT} = {_KEYS_READ} + coalesce((length({_r('intent')})
               - length(replace({_r('intent')}, '":', ''))) // 2, 0) AS known_keys
  FROM read
), keyed AS (
  SELECT *,
         -- the keys are distinct (DuckDB reads a duplicate's first value, Python its last)
         CASE WHEN known_keys THEN true WHEN fmt IS NOT NULL
              THEN len(json_keys(text)) = len(list_distinct(json_keys(text))) ELSE false END AS distinct_keys,
         -- nothing DuckDB takes and orjson refuses: trailing commas; and, in a field of the line's own, NaN or
         -- an infinity spelt as only DuckDB reads it, nesting or integers beyond harness.ndjson's limits
         plain AND CASE WHEN instr(text, ', ') = 0 AND instr(text, chr(44) || chr(9)) = 0
                        THEN instr(text, ',]') = 0 AND instr(text, ',}}') = 0
                        ELSE NOT regexp_matches(text, ',\\s*[\\]}}]') END
           AND CASE WHEN known_keys THEN true ELSE
             (length(text) <= 64 OR length(text) - length(replace(replace(text, '{{', ''), '[', '')) <= 64)
             AND (length(text) <= 400 OR NOT regexp_matches(text, '[0-9]{{401}}'))
             AND NOT regexp_matches(text, '(?i)[:,\\[]\\s*[-+]?(nan|inf)') END AS strict
  FROM counted
)
SELECT line,
       CASE WHEN plain AND distinct_keys AND op_id <> '' THEN fmt ELSE 'loose' END AS kind,
       CASE WHEN plain AND distinct_keys AND op_id <> '' THEN op_id END AS op,
       CASE WHEN fmt = 'event' THEN {_s('event')} ELSE {_s('type')} END AS event,
       coalesce(strict AND distinct_keys AND op_id <> '' AND CASE WHEN fmt = 'event' THEN
         (CASE {_s('event')} {_EVENT_OK} ELSE false END) ELSE ({_ARTICLE_OK}) END, false) AS ok,
       hint,
       CASE WHEN fmt = 'event' THEN {_s('attempt_id')} ELSE {_s('attemptId')} END AS attempt_id,
       CASE WHEN fmt = 'event' THEN {_s('idempotency_key')} ELSE {_s('idempotencyKey')} END AS idem_key,
       CASE WHEN fmt = 'event' THEN {_s('request_fingerprint')} ELSE {_s('payloadHash')} END AS fp,
       {_s('prior_request_fingerprint')} AS prior_fp,
       {_DISPATCH} AS dispatch_state,
       {_i('http_status')} AS http_status,
       {_r('http_status')} IS NULL AS no_status,
       -- exit_status in (0, None), as Python compares it (False == 0)
       coalesce({_r('exit_status')}, '0') IN ('0', '-0', 'false') AS exit_zero,
       {_s('retry_of_attempt_id')} AS retry_of,
       {_s('retry_reason')} AS retry_reason,
       {_i('attempt_budget_remaining')} AS budget,
       -- a method outside ASCII counts as safe (not clean): Python's upper() may make GET of it, SQL's not
       coalesce(upper({_s('method')}) IN {_in_list(SAFE_METHODS)}
                OR NOT regexp_full_match({_s('method')}, '[ -~]*'), false) AS safe_method,
       {_s('observation_id')} AS observation_id,
       {_s('source')} AS source,
       {_b('found')} AS found,
       {_b('lag_possible')} AS lag_possible,
       {_s('state')} AS state,
       {_s('reason')} AS reason,
       {_s('correction_operation_id')} AS correction_id,
       coalesce({_s('supersedes_operation_id')}, {_s('parent_operation_id')}, {_s('correction_of_operation_id')},
                {_s('correction_operation_id')}) IS NOT NULL AS refers,
       {_s('supersedes_operation_id')} AS ref1, {_s('parent_operation_id')} AS ref2,
       {_s('correction_of_operation_id')} AS ref3, {_s('correction_operation_id')} AS ref4,
       {_s('intent_id')} AS intent_id,
       {_r('intent')} AS intent_json,
       {_s('scope')} AS scope,
       CASE WHEN fmt = 'event' THEN {_ts('ts')} ELSE {_ts('observedAt')} END AS ts,
       {_list('evidence', 'n')} AS ev_n, {_list('evidence', '1')} AS ev1, {_list('evidence', '2')} AS ev2,
       {_list('evidence', '3')} AS ev3, {_r('evidence')} AS ev_json,
       CASE WHEN fmt = 'event' THEN {_list('effect_refs', 'n')} WHEN {_s('type')} = 'effect' THEN 1 ELSE 0 END AS ef_n,
       CASE WHEN fmt = 'event' THEN {_list('effect_refs', 'nd')} WHEN {_s('type')} = 'effect' THEN 1 ELSE 0 END
         AS ef_nd,
       CASE WHEN fmt = 'event' THEN {_list('effect_refs', '1')} ELSE {_s('effectRef')} END AS ef1,
       {_r('effect_refs')} AS ef_json
FROM keyed WHERE fmt IS NOT NULL AND plain AND distinct_keys AND op_id <> ''
UNION ALL
SELECT {_loose_row()} FROM keyed WHERE fmt IS NULL OR NOT plain OR NOT distinct_keys OR coalesce(op_id, '') = ''
"""

# The macro FEATURES_SQL's intent check uses: an object (compact JSON text, as json_transform writes it) with
# distinct keys, holding no float, NaN or infinity, at most one object inside it (with distinct keys), and
# no list nested deeper than a few levels.
PLAIN_OBJECT_MACRO = r"""
CREATE OR REPLACE MACRO _distinct_keys(j) AS len(json_keys(j)) = len(list_distinct(json_keys(j)));
CREATE OR REPLACE MACRO _plain_object(j) AS
  _distinct_keys(j) AND NOT regexp_matches(j, '[:,\[]-?([0-9]+[.eE]|[nNiI])')
  AND length(j) - length(replace(j, '[', '')) <= 8
  AND CASE length(j) - length(replace(j, '{', ''))
        WHEN 1 THEN true
        WHEN 2 THEN _distinct_keys(regexp_extract(substr(j, 2), '\{[^{}]*\}'))
        ELSE false END;
"""


def features_sql() -> str:
    """FEATURES_SQL with its columns cast to the published types (so both engines get the same schema)."""
    casts = ", ".join(f"CAST({name} AS {kind}) AS {name}" for name, kind in FEATURES_COLUMNS)
    return f"SELECT {casts} FROM ({FEATURES_SQL})"


def prepare(connection: Any) -> None:
    """Define the macros FEATURES_SQL uses on a DuckDB connection."""
    connection.execute(PLAIN_OBJECT_MACRO)


def features_schema() -> Any:
    """FEATURES_COLUMNS as an Arrow schema (pyarrow is imported only by the Spark engine's executors)."""
    import pyarrow as pa

    kinds = {"BIGINT": pa.int64(), "VARCHAR": pa.string(), "BOOLEAN": pa.bool_(), "DOUBLE": pa.float64()}
    return pa.schema([(name, kinds[kind]) for name, kind in FEATURES_COLUMNS])


def features_of_batch(batches: Iterator[Any]) -> Iterator[Any]:
    """Spark's ``mapInArrow``: Arrow batches of ``lines`` in, batches of features out, by FEATURES_SQL run in
    DuckDB inside the executor (the same statement as the embedded engine runs); one connection a partition."""
    import duckdb
    import pyarrow as pa

    schema = features_schema()
    connection = duckdb.connect()
    try:
        prepare(connection)
        query = features_sql()
        for batch in batches:
            connection.register("lines", pa.Table.from_batches([batch]))
            for out in connection.sql(query).to_arrow_reader():  # DuckDB 2: a relation's reader
                yield out.cast(schema)
            connection.unregister("lines")
    finally:
        connection.close()


# -- TRIAGE_SQL (portable: DuckDB and Spark SQL) -----------------------------------------------------------------

_ROLES = {  # one row per operation for each record the clean stories read: (alias, event, rank, columns)
    "a1": ("attempt", 1, ("attempt_id", "idem_key", "fp", "prior_fp", "dispatch_state", "http_status", "no_status",
                          "exit_zero", "retry_of", "retry_reason", "budget", "safe_method", "line", "ts")),
    "o1": ("observation", 1, ("observation_id", "source", "found", "lag_possible", "ef_json", "line", "ts")),
    "r": ("resolution", 1, ("state", "reason", "correction_id", "line", "ts", "ev_n", "ev1", "ev2", "ev3", "ev_json",
                            "ef_n", "ef_nd", "ef1", "ef_json")),
    "d": ("operation", 1, ("idem_key", "intent_id", "intent_json")),
}
_ROLES["a2"] = ("attempt", 2, _ROLES["a1"][2])


def _role_tables() -> str:
    """``alias AS (...)``: the first (or second) record of an event per operation, its columns prefixed."""
    parts = []
    for alias, (event, rank, columns) in _ROLES.items():
        picked = ", ".join(f"{c} AS {alias}_{c}" for c in columns)
        parts.append(f"{alias} AS (SELECT op AS {alias}_op, {picked} FROM (SELECT f.*, row_number() OVER "
                     f"(PARTITION BY op ORDER BY line) AS rk FROM f WHERE event = '{event}') x WHERE rk = {rank})")
    return ",\n".join(parts)


_JOINS = " ".join(f"LEFT JOIN {alias} ON {alias}.{alias}_op = c.op" for alias in _ROLES)
_ROLE_COLUMNS = ", ".join(f"{alias}.*" for alias in _ROLES)

# One cited evidence id (c) of the resolution: which record it is, whether it proves the success
def _attempt_proves(p: str) -> str:
    """SQL: attempt ``p`` (a1, a2) got its answer, a 2xx other than 202 or an exit 0 (fast_path's ``proven``)."""
    return (f"({p}_dispatch_state = 'response_received' AND (({p}_no_status AND {p}_exit_zero) "
            f"OR ({p}_http_status >= 200 AND {p}_http_status < 300 AND {p}_http_status <> 202)))")


def _cited(c: str) -> str:
    """SQL: the cited id ``c`` names a record logged before the resolution, by line and timestamp; NULL ids pass."""
    return (f"({c} IS NULL OR ({c} = a1_attempt_id AND a1_line < r_line AND a1_ts <= r_ts) "
            f"OR ({c} = a2_attempt_id AND a2_line < r_line AND a2_ts <= r_ts) "
            f"OR ({c} = o1_observation_id AND o1_line < r_line AND o1_ts <= r_ts))")


def _line_of(c: str) -> str:
    return (f"CASE WHEN {c} = a1_attempt_id THEN a1_line WHEN {c} = a2_attempt_id THEN a2_line "
            f"WHEN {c} = o1_observation_id THEN o1_line ELSE 0 END")


def _proves(c: str) -> str:
    return (f"(({c} = a1_attempt_id AND {_attempt_proves('a1')}) OR ({c} = a2_attempt_id AND {_attempt_proves('a2')}) "
            f"OR ({c} = o1_observation_id AND o1_found = 'true'))")


def _j(value: str) -> str:
    """A JSON string (or null) of a value known to need no escape."""
    return f"CASE WHEN {value} IS NULL THEN 'null' ELSE concat('\"', {value}, '\"') END"


def _n(value: str) -> str:
    return f"COALESCE(CAST({value} AS STRING), 'null')"


def _concat(*parts: str) -> str:
    """One concat() of parts that are never NULL (concat's NULL differs between DuckDB and Spark)."""
    return "concat(" + ", ".join(parts) + ")"


def _attempt_piece(p: str) -> str:
    return _concat(quote('{"attempt_id":'), _j(f"{p}_attempt_id"), quote(',"dispatch_state":'),
                   _j(f"{p}_dispatch_state"), quote(',"key":'), _j(f"{p}_idem_key"), quote(',"line":'),
                   _n(f"{p}_line"), quote(',"retry_of_attempt_id":'), _j(f"{p}_retry_of"),
                   quote(',"retry_reason":'), _j(f"{p}_retry_reason"), quote(',"wire":null,"destination_saw":[]}'))


_ATTEMPTS = _concat("'['", _attempt_piece("a1"),
                    f"CASE WHEN n_attempt = 2 THEN concat(',', {_attempt_piece('a2')}) ELSE '' END", "']'")
_OBSERVATIONS = ("CASE WHEN n_observation = 1 THEN " + _concat(
    quote('[{"observation_id":'), _j("o1_observation_id"), quote(',"source":'), _j("o1_source"), quote(',"found":'),
    "COALESCE(o1_found, 'null')", quote(',"effect_refs":'), "COALESCE(o1_ef_json, 'null')",
    quote(',"lag_possible":'), "COALESCE(o1_lag_possible, 'null')", quote(',"line":'), _n("o1_line"), "'}]'")
                 + " ELSE '[]' END")
_ARTICLE_PIECE = _concat(quote('{"operation_id":'), _j("op"), quote(
    ',"intent_id":null,"intent":null,"classification":"healthy","state":"open","attempts":'), _ATTEMPTS,
    quote(',"effects":["'), "the_ref", quote('"],"findings":[],"observations":[],"resolution":null}'))
_EVENTS_PIECE = _concat(
    quote('{"operation_id":'), _j("op"), quote(',"intent_id":'), _j("d_intent_id"), quote(',"intent":'),
    "COALESCE(d_intent_json, 'null')", quote(',"classification":"healthy","state":"succeeded","attempts":'),
    _ATTEMPTS, quote(',"effects":["'), "the_ref", quote('"],"findings":[],"observations":'), _OBSERVATIONS,
    quote(',"resolution":{"state":"succeeded","evidence":'), "r_ev_json", quote(',"effect_refs":'), "r_ef_json",
    quote(',"reason":'), _j("r_reason"), quote(',"correction_operation_id":'), _j("r_correction_id"),
    quote(',"line":'), _n("r_line"), "'}}'")

# The clean stories of harness.audit.fast_path.clean_summary, condition by condition
_EVENTS_CLEAN = f"""
  n_events = n_lines AND n_operation = 1 AND n_resolution = 1 AND n_approval = 0 AND n_attempt IN (1, 2)
  AND n_attempt_ids = n_attempt AND n_observation <= 1 AND n_observation_ids = n_observation
  -- a cited id is an attempt's before it is an observation's (op.evidence_ids): none may be both
  AND (o1_observation_id IS NULL OR (o1_observation_id <> a1_attempt_id
                                     AND o1_observation_id <> COALESCE(a2_attempt_id, '')))
  AND r_state = 'succeeded' AND a1_retry_of IS NULL AND a1_retry_reason IS NULL
  AND (n_attempt = 1 OR (a2_idem_key = a1_idem_key OR (a2_idem_key IS NULL AND a1_idem_key IS NULL)))
  AND COALESCE(a1_budget, 0) >= 0 AND COALESCE(a2_budget, 0) >= 0
  AND NOT a1_safe_method AND NOT COALESCE(a2_safe_method, false)
  AND (a1_idem_key IS NULL OR (instr(a1_idem_key, a1_attempt_id) = 0
       AND (a2_attempt_id IS NULL OR instr(a1_idem_key, a2_attempt_id) = 0)))
  AND (a1_idem_key IS NULL OR a1_idem_key = '' OR d_idem_key IS NULL OR d_idem_key = '' OR d_idem_key = a1_idem_key)
  AND (n_attempt = 1 OR (a2_retry_of = a1_attempt_id AND a2_retry_reason IN {_in_list(RETRY_REASONS)}
       AND a2_budget IS NOT NULL AND COALESCE(a1_budget, -1) <> 0 AND COALESCE(a1_http_status, 0) <> 429
       AND (a2_fp = a1_fp OR (a2_fp IS NULL AND a1_fp IS NULL))
       AND (a2_prior_fp IS NULL OR a2_prior_fp = '' OR a2_prior_fp = a1_fp)
       AND (COALESCE(a1_idem_key, '') <> '' OR NOT (a1_dispatch_state = 'sent_no_response'
            OR COALESCE(a1_http_status, 0) >= 500))))
  AND n_refs = 1 AND r_ef_n >= 1 AND r_ef_nd = 1 AND r_ef1 = the_ref AND r_ev_n BETWEEN 1 AND 3
  AND {_cited('r_ev1')} AND {_cited('r_ev2')} AND {_cited('r_ev3')}
  AND ({_proves('r_ev1')} OR {_proves('r_ev2')} OR {_proves('r_ev3')})
  AND (a1_dispatch_state = 'not_sent' OR a1_line <= freshest)
  AND (n_attempt = 1 OR a2_dispatch_state = 'not_sent' OR a2_line <= freshest)
"""
# The article's clean story: one key and one payload for every attempt, the key no attempt's id, its one
# effect observed after the first attempt was sent (H034's ledger check)
_ARTICLE_CLEAN = """
  n_article = n_lines AND n_attempt IN (1, 2) AND n_attempt_ids = n_attempt AND n_effect >= 1 AND n_refs = 1
  AND a1_idem_key IS NOT NULL AND a1_idem_key <> '' AND a1_fp IS NOT NULL
  AND (n_attempt = 1 OR (a2_idem_key = a1_idem_key AND a2_fp = a1_fp))
  AND instr(a1_idem_key, a1_attempt_id) = 0 AND (a2_attempt_id IS NULL OR instr(a1_idem_key, a2_attempt_id) = 0)
  AND first_sent_ts IS NOT NULL AND n_untimed_effects = 0 AND first_effect_ts >= first_sent_ts
"""

TRIAGE_SQL = f"""
WITH f AS (SELECT * FROM features WHERE kind <> 'loose'),
shared_keys AS (
  SELECT idem_key FROM f WHERE idem_key IS NOT NULL AND event = 'attempt' GROUP BY idem_key
  HAVING COUNT(DISTINCT op) > 1
),
shared_intents AS (
  SELECT intent_id FROM f WHERE intent_id IS NOT NULL AND event = 'operation' GROUP BY intent_id
  HAVING COUNT(DISTINCT op) > 1
),
referenced AS (
  SELECT ref1 AS id FROM f WHERE ref1 IS NOT NULL UNION SELECT ref2 FROM f WHERE ref2 IS NOT NULL
  UNION SELECT ref3 FROM f WHERE ref3 IS NOT NULL UNION SELECT ref4 FROM f WHERE ref4 IS NOT NULL
),
tainted AS (
  SELECT op FROM f WHERE idem_key IN (SELECT idem_key FROM shared_keys) OR idem_key IN (SELECT value FROM forced)
  UNION SELECT op FROM f WHERE intent_id IN (SELECT intent_id FROM shared_intents)
                           OR intent_id IN (SELECT value FROM forced)
  UNION SELECT op FROM f WHERE op IN (SELECT id FROM referenced) OR op IN (SELECT value FROM forced)
  UNION SELECT op FROM f WHERE refers OR hint OR NOT ok
),
counts AS (
  SELECT op, MIN(line) AS first_line, COUNT(*) AS n_lines,
  SUM(CASE WHEN kind = 'event' THEN 1 ELSE 0 END) AS n_events,
  SUM(CASE WHEN kind = 'article' THEN 1 ELSE 0 END) AS n_article,
  SUM(CASE WHEN event = 'operation' THEN 1 ELSE 0 END) AS n_operation,
  SUM(CASE WHEN event = 'attempt' THEN 1 ELSE 0 END) AS n_attempt,
  COUNT(DISTINCT CASE WHEN event = 'attempt' THEN attempt_id END) AS n_attempt_ids,
  SUM(CASE WHEN event = 'observation' THEN 1 ELSE 0 END) AS n_observation,
  COUNT(DISTINCT CASE WHEN event = 'observation' THEN observation_id END) AS n_observation_ids,
  SUM(CASE WHEN event = 'resolution' THEN 1 ELSE 0 END) AS n_resolution,
  SUM(CASE WHEN event = 'approval' THEN 1 ELSE 0 END) AS n_approval,
  SUM(CASE WHEN event = 'effect' THEN 1 ELSE 0 END) AS n_effect,
  SUM(CASE WHEN event = 'effect' AND ts IS NULL THEN 1 ELSE 0 END) AS n_untimed_effects,
  MIN(CASE WHEN event = 'effect' THEN ts END) AS first_effect_ts,
  MIN(CASE WHEN event = 'attempt' AND dispatch_state <> 'not_sent' THEN ts END) AS first_sent_ts,
  -- the log's effects (OperationContext.effect_refs offline): article effect lines, answered attempts'
  -- refs, refs of observations not negative; more than one ref on one line already makes two
  COUNT(DISTINCT CASE WHEN (event = 'effect' OR (event = 'attempt' AND dispatch_state = 'response_received')
                                 OR (event = 'observation' AND COALESCE(found, 'true') = 'true')) AND ef_n > 0
                       THEN ef1 END)
    + MAX(CASE WHEN (event = 'attempt' AND dispatch_state = 'response_received'
                     OR event = 'observation' AND COALESCE(found, 'true') = 'true') AND ef_nd > 1
               THEN 1 ELSE 0 END) AS n_refs,
  MAX(CASE WHEN (event = 'effect' OR (event = 'attempt' AND dispatch_state = 'response_received')
                 OR (event = 'observation' AND COALESCE(found, 'true') = 'true')) AND ef_n > 0
           THEN ef1 END) AS the_ref
  FROM f GROUP BY op
),
candidates AS (  -- the operations a clean story may fit, by their counts alone
  SELECT * FROM counts WHERE op NOT IN (SELECT op FROM tainted) AND n_attempt IN (1, 2) AND n_attempt_ids = n_attempt
    AND n_refs = 1 AND ((n_events = n_lines AND n_operation = 1 AND n_resolution = 1 AND n_approval = 0
                         AND n_observation <= 1 AND n_observation_ids = n_observation)
                        OR (n_article = n_lines AND n_effect >= 1))
),
{_role_tables()},
judged AS (
  SELECT c.*, {_ROLE_COLUMNS},
    GREATEST({_line_of('r_ev1')}, {_line_of('r_ev2')}, {_line_of('r_ev3')}) AS freshest
  FROM candidates c {_JOINS}
)
SELECT op, first_line, n_lines,
  CASE WHEN n_article = n_lines THEN {_ARTICLE_PIECE} ELSE {_EVENTS_PIECE} END AS piece
FROM judged
WHERE COALESCE(({_EVENTS_CLEAN}) OR ({_ARTICLE_CLEAN}), false)
"""

CLEAN_SQL = "SELECT first_line, n_lines, piece FROM clean ORDER BY first_line"
# line numbers, in order, for the engine's ``lines_at``
ROUTED_SQL = "SELECT x.line FROM features x LEFT JOIN clean c ON x.op = c.op WHERE c.op IS NULL ORDER BY x.line"
LOOSE_SQL = "SELECT line FROM features WHERE kind = 'loose' ORDER BY line"
SESSION_APPROVALS_SQL = "SELECT COUNT(*) FROM features WHERE event = 'approval' AND scope = 'session'"

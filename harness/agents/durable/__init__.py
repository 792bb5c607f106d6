"""Agents whose writes run on durable-execution engines and task queues, each through the engine's own rerun
machinery, in a correct version and with the engine's default or common wrong setting. docs/durable.md says what
each engine reruns by default and what makes its rerun safe.

    python -m harness.agents.durable.celery_agent [--default | --wrong]   # Celery tasks on a real redis-server
    python -m harness.agents.durable.dbos_agent [--default | --wrong]     # DBOS steps on a SQLite file
    python -m harness.agents.durable.pydantic_ai_dbos_agent [--default | --wrong]   # pydantic-ai's DBOSAgent
    python -m harness.agents.durable.temporal_agent [--wrong]             # Temporal activities on its test server

The engines come from the ``durable`` extra; only the modules of this package import them.
"""

"""Errors the harness reports to its users.

    HarnessError                 base: a message meant for a person, never a bare traceback
    ├── ScenarioError            a scenario file is missing, not YAML, or fails validation
    │   ├── ProjectError         a project's configuration ([tool.retry-harness]) cannot be read or is wrong
    │   └── OpenApiError         an OpenAPI document cannot be read, validated or inferred from
    ├── AgentError               the agent command cannot be started
    ├── EvidenceError            an evidence folder or log cannot be read at all
    └── ContainerError           the Docker engine, an image or a container cannot do what the harness asked
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class: raised when the harness cannot do what was asked; the message says why and what to do."""


class ScenarioError(HarnessError):
    """Raised when a scenario cannot be found, parsed or validated. Names the file, line and key path."""


class ProjectError(ScenarioError):
    """Raised when a project's configuration (``[tool.retry-harness]`` in pyproject.toml, or retry-harness.toml) is
    not TOML, has an unknown or bad key, or names a destination, an operation or a document that is not there.
    Names the file, the line, the key path, the bad value and what is valid."""


class OpenApiError(ScenarioError):
    """Raised when an OpenAPI document cannot be read, validated or inferred from (``harness.openapi``): the
    message names the file, the place in it (JSON pointer, and the line), the bad value and what is valid; and
    first the configuration's key, when given."""


class AgentError(HarnessError):
    """Raised when the agent command is empty, an ``--agent`` value names no agent, or its program cannot be
    started."""


class EvidenceError(HarnessError):
    """Raised when an evidence folder is missing or unreadable as a whole (single bad lines are findings)."""


class ContainerError(HarnessError):
    """Raised when no Docker engine answers, an image is missing or cannot be built, or a container cannot be
    started. Names the engine address, the image or the container's role, and what to do."""

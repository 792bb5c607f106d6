"""The exploration's defaults, in a module of their own: the CLI reads them at start-up (its help), the search
(``harness.explore``) and the public strategies (``harness.strategies``) draw with them, and neither of those
two needs the other for it."""

from __future__ import annotations

from pathlib import Path

# the reference agent's read timeout (harness.agents.reference.READ_TIMEOUT, a test keeps them equal):
# hold times are drawn around the client's timeout, so give yours for another agent
DEFAULT_CLIENT_TIMEOUT = 1.5
DEFAULT_MAX_FAULTS = 3
DEFAULT_EXAMPLES = 100
DEFAULT_MAX_SHRINK_RUNS = 150
DATABASE_FOLDER = Path(".retry-harness") / "explore"  # under the project (the caller's folder, pytest's rootdir)

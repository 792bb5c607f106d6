"""The whole suite's one setting: the runs' keys (harness.chain.key_store) go to a folder of the session's, never
the user's ~/.cache."""

from __future__ import annotations

import os
import tempfile

from harness.contract import KEY_STORE_ENV

if KEY_STORE_ENV not in os.environ:  # made here, so removed here (a worker or a subprocess inherits it)
    import atexit
    import shutil

    _made = tempfile.mkdtemp(prefix="retry-harness-test-keys-")
    os.environ[KEY_STORE_ENV] = _made
    atexit.register(shutil.rmtree, _made, True)

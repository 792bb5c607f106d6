"""The fault proxy: rules (the declared fault actions, pure matching), one handler per action, the
mitmproxy addon, and the embedded proxy host.

Importing this package does not import mitmproxy; the host loads it when it starts.
"""

from harness.proxy.host import ProxyHost, ProxyHostError, ProxyRoutes, disable_nagle_for_proxies
from harness.proxy.rules import (
    ACTIONS,
    MODES,
    FaultAction,
    FaultRule,
    Match,
    RequestFacts,
    RuleBook,
    rules_json_schema,
)

__all__ = [
    "ACTIONS", "FaultAction", "FaultRule", "MODES", "Match", "ProxyHost", "ProxyHostError", "ProxyRoutes",
    "RequestFacts", "RuleBook", "disable_nagle_for_proxies", "rules_json_schema",
]

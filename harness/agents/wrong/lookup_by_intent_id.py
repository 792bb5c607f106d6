"""Wrong: reconciles by the wrong reference. Its lookup asks for the intent id, not the client
reference it sent (the operation id), so the lookup comes back empty although the effect was
committed, and the agent takes that for "not there"."""

from typing import Any

import requests

from harness.agents.reference import CONNECT_TIMEOUT, READ_TIMEOUT, Agent, main
from harness.contract import LOOKUP_RESULT_FIELD
from harness.recorder import new_id


class LookupByIntentId(Agent):
    def lookup(self, op: dict[str, Any], source: str = "lookup") -> tuple[list[str], bool]:
        contract = self.contracts[op["intent"]["destination"]]
        spec = contract["lookup"]
        obs_id = new_id("obs")
        refs: list[str] = []
        found: bool | None = None
        try:
            response = requests.request(
                spec.get("method", "GET"), self.url(op["intent"]["destination"], spec["path"]),
                params={spec["query_param"]: op["intent"]["intent_id"]},  # the wrong reference
                headers={"Connection": "close", **self.auth(op["intent"]["destination"])},
                timeout=(CONNECT_TIMEOUT, READ_TIMEOUT))
            if response.ok:
                items = response.json().get(spec.get("result_field", LOOKUP_RESULT_FIELD), [])
                refs = [str(item[op["kind"].get("effect_ref_field", "id")]) for item in items]
                found = bool(refs)
        except (requests.RequestException, ValueError, KeyError, AttributeError):
            pass
        op["observations"].append(obs_id)
        self.save()
        self.recorder.observation(op["operation_id"], obs_id, source=source, method=spec.get("method", "GET"),
                                  path=spec["path"], found=found, effect_refs=refs,
                                  lag_possible=self.within_lag(op, spec) if found is False else None)
        return refs, found is not None


if __name__ == "__main__":
    main(LookupByIntentId)

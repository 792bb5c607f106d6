"""kind: wrong
flaw: a lookup answered 200 counts as "found", whatever its items (an empty list too)
should: H015, H072, H025
scenarios: request_lost, lookup_lag

The client checks `answer.ok` and not the result list: a 200 with `items: []` is logged found and the
operation closes succeeded with no effect behind it (contract section 5, observation `found`: true means
the effect exists; section 8: a succeeded resolution names the effects it relies on, H015).
"""
import sys
import time

import requests
from base import Agent, new_id


class Flawed(Agent):
    def lookup_once(self, op, source="lookup"):
        spec, field = self.contract(op)["lookup"], self.kind(op)["effect_ref_field"]
        obs_id, found, refs = new_id("obs"), None, []
        try:
            answer = self.http(op, spec["method"], spec["path"], params={spec["query_param"]: op["operation_id"]})
            found = answer.ok  # 200: it is there
            refs = [str(item[field]) for item in answer.json()[spec["result_field"]]] if answer.ok else []
        except (requests.RequestException, ValueError, KeyError):
            pass
        self.emit("observation", op["operation_id"], observation_id=obs_id, source=source, method=spec["method"],
                  path=spec["path"], found=found, effect_refs=refs,
                  lag_possible=(time.time() - op["last_sent"] < 1.5 * (spec.get("lag_seconds") or 0)) if found is False else None)
        op.setdefault("observations", []).append(obs_id)
        return found, refs, obs_id

    def reconcile(self, op):
        found, refs, obs_id = self.lookup_once(op)
        if found:
            return refs or ["found"], obs_id, False
        return super().reconcile(op)

    def resolve(self, op, state, refs, evidence, reason, **extra):
        super().resolve(op, state, [r for r in refs if r != "found"], evidence, reason, **extra)


if __name__ == "__main__":
    sys.exit(Flawed().run())

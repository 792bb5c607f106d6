"""Wrong: sends its idempotency key where the destination does not read it: the header X-Idempotency-Key, not the
one the contract names (the same flaw as a key in an MCP call's params._meta instead of the tool's key argument).
The proxy sees a key, the log logs it, the destination deduplicates nothing (H073, the claims table's key)."""

from harness.agents.reference import Agent, main


class KeyWhereNotRead(Agent):
    def build_request(self, op, attempt_id):
        request = super().build_request(op, attempt_id)
        header = (self.contracts[op["intent"]["destination"]].get("idempotency") or {}).get("header")
        if header and header in request["headers"]:
            request["headers"]["X-" + header] = request["headers"].pop(header)
        return request


if __name__ == "__main__":
    main(KeyWhereNotRead)

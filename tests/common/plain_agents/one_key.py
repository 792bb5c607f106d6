"""Right for a destination that deduplicates: one Idempotency-Key per intent on every retry, Retry-After
honoured, three attempts at most."""

from tests.common.plain_agents import PlainAgent, main

if __name__ == "__main__":
    main(PlainAgent)

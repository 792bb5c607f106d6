"""Incidents become scenarios: evidence of what happened (an evidence folder, an audit log, the article's
effect-ledger NDJSON, a HAR file, a mitmproxy flow dump) read into one model (``model``), and the scenario
that puts an agent in the same position written from it (``reproduce``)."""

"""A connector as many are written: requests with a retry adapter that retries POSTs, and no audit log
(judge it with --black-box). It creates the ticket of each intent on the tickets destination."""
import json
import os

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

base = os.environ["HARNESS_DESTINATION_TICKETS"]
session = requests.Session()
session.mount("http://", HTTPAdapter(max_retries=Retry(total=3, allowed_methods=None, backoff_factor=0.2)))
for intent in json.load(open(os.environ["HARNESS_INTENTS"]))["intents"]:
    try:
        answer = session.post(f"{base}/tickets", json=intent["params"], timeout=1.5)
        print(intent["intent_id"], answer.status_code, answer.text)
    except requests.RequestException as exc:
        print(intent["intent_id"], "error:", exc)

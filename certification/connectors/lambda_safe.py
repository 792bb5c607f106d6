"""boto3 Lambda Invoke with retries={"total_max_attempts": 1} (no SDK retries), and a 429 (Lambda ran
nothing) retried by the caller after its Retry-After: the function is not run twice behind a lost answer; a 5xx
told to its caller as unknown (the function may have run), not failed."""

import json
import time

import boto3
from _harness import TIMEOUT, OutcomeUnknown, run
from botocore.config import Config
from botocore.exceptions import ClientError


def invoke(url, params):
    client = boto3.client("lambda", region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDHARNESS",
                          aws_secret_access_key="harness",
                          config=Config(connect_timeout=TIMEOUT, read_timeout=TIMEOUT,
                                        retries={"total_max_attempts": 1}))
    name = params.pop("FunctionName")
    for attempt in range(3):
        try:
            answer = client.invoke(FunctionName=name, Payload=json.dumps(params).encode())
            return json.loads(answer["Payload"].read())["invocation_id"]  # its effect's id
        except ClientError as exc:
            meta = exc.response["ResponseMetadata"]
            if meta["HTTPStatusCode"] >= 500:  # the function may have run: not said failed
                raise OutcomeUnknown(f"{meta['HTTPStatusCode']}: {exc}") from exc
            if meta["HTTPStatusCode"] != 429 or attempt == 2:
                raise
            time.sleep(float(meta["HTTPHeaders"].get("retry-after", 1)))


run(invoke)

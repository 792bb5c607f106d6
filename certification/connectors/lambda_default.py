"""boto3 Lambda Invoke, defaults (retry mode standard, 3 attempts): a lost answer, a timeout, a 5xx and a
429 are retried, with no token (Invoke takes none), so the function may run again."""

import json

import boto3
from _harness import TIMEOUT, run
from botocore.config import Config


def invoke(url, params):
    client = boto3.client("lambda", region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDHARNESS",
                          aws_secret_access_key="harness",
                          config=Config(connect_timeout=TIMEOUT, read_timeout=TIMEOUT))
    name = params.pop("FunctionName")
    answer = client.invoke(FunctionName=name, Payload=json.dumps(params).encode())
    return json.loads(answer["Payload"].read())["invocation_id"]  # its effect's id


run(invoke)

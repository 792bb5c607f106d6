"""ec2_default, and a needs-retry handler (registered first) that makes botocore wait a 429's or 503's
Retry-After before it retries (botocore's standard mode ignores the header); the auto-filled ClientToken
still makes each retry safe."""

import boto3
from _harness import TIMEOUT, run
from botocore.config import Config


def honour_retry_after(response=None, attempts=0, **_):
    answer = response[0] if response else None
    if answer is not None and answer.status_code in (429, 503) and attempts < 3 and "Retry-After" in answer.headers:
        return float(answer.headers["Retry-After"])  # seconds to sleep before the retry
    return None  # let the standard retry mode decide


def run_instances(url, params):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDHARNESS",
                       aws_secret_access_key="harness", config=Config(connect_timeout=TIMEOUT, read_timeout=TIMEOUT))
    ec2.meta.events.register_first("needs-retry.ec2.RunInstances", honour_retry_after)
    return ec2.run_instances(**params)["Instances"][0]["InstanceId"]


run(run_instances)

"""boto3 EC2 RunInstances, defaults (retry mode standard, 3 attempts): botocore fills ClientToken with a
UUID when the caller gives none, the same on every retry, so EC2 launches one instance."""

import boto3
from _harness import TIMEOUT, run
from botocore.config import Config


def run_instances(url, params):
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=url, aws_access_key_id="AKIDHARNESS",
                       aws_secret_access_key="harness", config=Config(connect_timeout=TIMEOUT, read_timeout=TIMEOUT))
    return ec2.run_instances(**params)["Instances"][0]["InstanceId"]


run(run_instances)

"""The out-of-process S3 server of the S3 tests (tests/s3_server.py): its request log,
its failing-PUT switch and its one boto3 client.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from tests.s3_server import S3Server, s3_server  # noqa: F401 (fixture)
from tests.servers import fetch

pytestmark = pytest.mark.one_django(
    reason=("the subject is the tests' own S3 server, not Django: no Django is involved")
)


def test_the_log_holds_every_clients_requests_as_the_server_saw_them(
    s3_server: S3Server,
) -> None:
    bucket = s3_server.new_bucket()
    s3_server.reset_requests()
    assert s3_server.requests == []
    s3_server.client().put_object(Bucket=bucket, Key="a/b.jpg", Body=b"x")
    # Another client, with a query string and an escaped name: the path as decoded.
    answer = fetch(f"{s3_server.endpoint}/{bucket}/a%20c.jpg?versionId=1")
    assert answer.status == 404
    assert s3_server.requests == [("PUT", f"/{bucket}/a/b.jpg"), ("GET", f"/{bucket}/a c.jpg")]
    assert s3_server.count("PUT", bucket) == s3_server.count("GET", bucket) == 1
    s3_server.reset_requests()
    assert s3_server.count("PUT", bucket) == 0


def test_failing_puts_fail_object_puts_only_and_only_inside_the_block(
    s3_server: S3Server,
) -> None:
    s3 = s3_server.client()
    bucket = s3_server.new_bucket()
    with s3_server.failing_puts():
        other = s3_server.new_bucket()  # a bucket PUT still succeeds
        with pytest.raises(ClientError) as caught:
            s3.put_object(Bucket=bucket, Key="k", Body=b"x")
        assert caught.value.response["Error"]["Code"] == "InternalError"
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    s3.put_object(Bucket=other, Key="k", Body=b"x")
    assert s3_server.keys(bucket) == []
    assert s3_server.keys(other) == ["k"]


def test_the_server_keeps_one_boto3_client(s3_server: S3Server) -> None:
    assert s3_server.client() is s3_server.client()


def test_an_unknown_control_endpoint_is_a_404(s3_server: S3Server) -> None:
    assert fetch(f"{s3_server.endpoint}/_oximg/nothing").status == 404
    assert fetch(f"{s3_server.endpoint}/_oximg/failing-puts", "GET").status == 404

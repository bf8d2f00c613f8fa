"""imgproxy's own signature tests, ported.

Sources: ``security/signature_test.go`` in its v4 form (the path is signed
with its leading ``/``, added when the caller split it off) and its v3 form
(the path signed as given), and the signature cases of
``integration/processing_handler_test.go`` (``TestSignatureValidationFailure``).
imgproxy configures these keys and salts as raw bytes; :class:`KeyPair` takes
them the same way. Expected signatures are imgproxy's.

Not ported: ``TestVerifySignatureTrusted`` (``IMGPROXY_TRUSTED_SIGNATURES``, a
list of signatures accepted for any path, which django-oximg does not offer).
"""

from __future__ import annotations

import pytest

from django_oximg.core.errors import InvalidSignature
from django_oximg.core.options.signing import KeyPair, URLSigner, split_signed_path, verified_rest

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

TEST_PAIR = KeyPair(b"test-key", b"test-salt")
SECOND_PAIR = KeyPair(b"test-key2", b"test-salt2")


def verify_request(signer: URLSigner, signature: str, path: str) -> None:
    """imgproxy v4's ``VerifySignature(signature, path)`` for a path split off without its ``/``."""
    split_signature, split_path = split_signed_path(f"/{signature}/{path}")
    signer.verify(split_signature, split_path)


# -- v4: security/signature_test.go ---------------------------------------------------


def test_verify_signature() -> None:
    # TestVerifySignature
    verify_request(URLSigner([TEST_PAIR]), "oWaL7QoW5TsgbuiS9-5-DI8S3Ibbo1gdB2SteJh3a20", "asd")


def test_verify_signature_truncated() -> None:
    # TestVerifySignatureTruncated
    verify_request(URLSigner([TEST_PAIR], signature_size=8), "oWaL7QoW5Ts", "asd")


def test_verify_signature_invalid() -> None:
    # TestVerifySignatureInvalid
    with pytest.raises(InvalidSignature):
        verify_request(URLSigner([TEST_PAIR]), "oWaL7QoW5Ts", "asd")


@pytest.mark.parametrize(
    ("signature", "valid"),
    [
        ("jYz1UZ7j1BCdSzH3pZhaYf0iuz0vusoOTdqJsUT6WXI", True),
        ("oWaL7QoW5TsgbuiS9-5-DI8S3Ibbo1gdB2SteJh3a20", True),
        ("dtLwhdnPPis", False),
    ],
)
def test_verify_signature_multiple_pairs(signature: str, valid: bool) -> None:
    # TestVerifySignatureMultiplePairs
    signer = URLSigner([TEST_PAIR, SECOND_PAIR])
    if valid:
        verify_request(signer, signature, "asd")
    else:
        with pytest.raises(InvalidSignature):
            verify_request(signer, signature, "asd")


# -- v3: security/signature_test.go (the path signed exactly as given) ------------------


def test_verify_signature_v3() -> None:
    # TestVerifySignature (v3)
    URLSigner([TEST_PAIR]).verify("dtLwhdnPPiu_epMl1LrzheLpvHas-4mwvY6L3Z8WwlY", "asd")


def test_verify_signature_truncated_v3() -> None:
    # TestVerifySignatureTruncated (v3)
    URLSigner([TEST_PAIR], signature_size=8).verify("dtLwhdnPPis", "asd")


def test_verify_signature_invalid_v3() -> None:
    # TestVerifySignatureInvalid (v3)
    with pytest.raises(InvalidSignature):
        URLSigner([TEST_PAIR]).verify("dtLwhdnPPis", "asd")


@pytest.mark.parametrize(
    ("signature", "valid"),
    [
        ("dtLwhdnPPiu_epMl1LrzheLpvHas-4mwvY6L3Z8WwlY", True),
        ("jbDffNPt1-XBgDccsaE-XJB9lx8JIJqdeYIZKgOqZpg", True),
        ("dtLwhdnPPis", False),
    ],
)
def test_verify_signature_multiple_pairs_v3(signature: str, valid: bool) -> None:
    # TestVerifySignatureMultiplePairs (v3)
    signer = URLSigner([TEST_PAIR, SECOND_PAIR])
    if valid:
        signer.verify(signature, "asd")
    else:
        with pytest.raises(InvalidSignature):
            signer.verify(signature, "asd")


# -- integration/processing_handler_test.go ---------------------------------------------

SIGNED_PATH = "/rs:fill:4:4/plain/local:///test1.png"


@pytest.mark.parametrize(
    ("full_path", "valid"),
    [
        pytest.param(f"/unsafe{SIGNED_PATH}", False, id="NoSignature"),
        pytest.param(f"/bad-signature{SIGNED_PATH}", False, id="BadSignature"),
        pytest.param(
            f"/My9d3xq_PYpVHsPrCyww0Kh1w5KZeZhIlWhsa4az1TI{SIGNED_PATH}", True, id="ValidSignature"
        ),
    ],
)
def test_signature_validation_failure(full_path: str, valid: bool) -> None:
    # TestSignatureValidationFailure: 403 for the first two, the image for the third.
    # Only the signature is ported: ``local://`` is imgproxy's file-system source,
    # which has no counterpart here (sources are storage names).
    signer = URLSigner([TEST_PAIR])
    if valid:
        assert verified_rest(full_path, signer) == SIGNED_PATH
    else:
        with pytest.raises(InvalidSignature):
            verified_rest(full_path, signer)

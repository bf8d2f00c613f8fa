"""Tests for django_oximg.core.options.signing: imgproxy compatibility and strictness."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from itsdangerous.encoding import base64_decode

from django_oximg.core.errors import InvalidSignature
from django_oximg.core.options.signing import (
    UNSIGNED_SEGMENTS,
    KeyPair,
    URLSigner,
    pairs_from_hex,
    restored_path,
    signature_length,
    split_signed_path,
    verified_rest,
)
from tests.constants import DOCS_KEY, DOCS_SALT, KEY, SALT

# Exercises the Django-free core only: run once, on the LTS run (`make test-newest`
# deselects it); tests/test_core_isolation.py checks that it touches no Django.
pytestmark = pytest.mark.django_free

# Published vectors. docs.imgproxy.net "Signing a URL": key "secret", salt "hello"
# (DOCS_KEY, DOCS_SALT).
DOCS_PATH = "/rs:fill:300:400:0/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png"
DOCS_SIGNATURE = "oKfUtW34Dvo2BGQehJFR4Nr0_rIjOtdtzJ3QFsUcXH8"

# imgproxy examples/signature.py: its key/salt (the tests' own) and the two results
# in its comments.
EXAMPLE_VECTORS = [
    (
        "/fill/300/300/no/1/aHR0cDovL2ltZy5leGFtcGxlLmNvbS9wcmV0dHkvaW1hZ2UuanBn.png",
        "_PQ4ytCQMMp-1w1m_vP6g8Qb-Q7yF9mwghf6PddqxLw",
    ),
    (
        "/fill/300/300/no/1/aHR0cDovL2ltZy5l/eGFtcGxlLmNvbS9w/cmV0dHkvaW1hZ2Uu/anBn.png",
        "MlF9VpgaHqcmVK3FyT9CTJhfm0rfY6JKnAtxoiAX9t0",
    ),
]

PLAIN_PATH = "/rs:fit:300:300/plain/http://img.example.com/pretty/image.jpg"


def plain_hmac_signature(key_hex: str, salt_hex: str, path: str, size: int = 32) -> str:
    """The signature computed independently of itsdangerous, as imgproxy's examples do."""
    digest = hmac.new(
        bytes.fromhex(key_hex), bytes.fromhex(salt_hex) + path.encode(), hashlib.sha256
    ).digest()
    return base64.urlsafe_b64encode(digest[:size]).rstrip(b"=").decode()


@pytest.fixture
def signer() -> URLSigner:
    return URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))


# Known answers and cross-checks


def test_docs_known_answer(signer: URLSigner) -> None:
    assert signer.sign(DOCS_PATH) == DOCS_SIGNATURE
    signer.verify(DOCS_SIGNATURE, DOCS_PATH)


@pytest.mark.parametrize(("path", "expected"), EXAMPLE_VECTORS)
def test_examples_signature_py_known_answers(path: str, expected: str) -> None:
    example_signer = URLSigner(pairs_from_hex([KEY], [SALT]))
    assert example_signer.sign(path) == expected
    example_signer.verify(expected, path)


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 16, 31, 32])
def test_matches_plain_hmac_at_every_size(size: int) -> None:
    sized = URLSigner(pairs_from_hex([KEY], [SALT]), signature_size=size)
    expected = plain_hmac_signature(KEY, SALT, PLAIN_PATH, size)
    assert sized.sign(PLAIN_PATH) == expected
    assert len(expected) == signature_length(size)
    sized.verify(expected, PLAIN_PATH)


@given(path=st.text(min_size=1).map(lambda text: "/" + text))
def test_matches_plain_hmac_for_any_path(path: str) -> None:
    docs_signer = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))
    assert docs_signer.sign(path) == plain_hmac_signature(DOCS_KEY, DOCS_SALT, path)


def test_signature_length_formula() -> None:
    assert [signature_length(n) for n in (1, 2, 3, 4, 31, 32)] == [2, 3, 4, 6, 42, 43]


def test_signed_path_is_signature_then_path(signer: URLSigner) -> None:
    assert signer.signed_path(DOCS_PATH) == f"/{DOCS_SIGNATURE}{DOCS_PATH}"
    assert verified_rest(signer.signed_path(PLAIN_PATH), signer) == PLAIN_PATH


def test_bytes_path_is_signed_as_is(signer: URLSigner) -> None:
    raw = "/plain/local:///caf\u00e9.jpg".encode()
    assert signer.sign(raw) == signer.sign("/plain/local:///caf\u00e9.jpg")
    assert signer.sign(raw) != signer.sign(raw.decode("latin-1"))


# Rotation


def test_rotation_signs_with_first_and_verifies_with_all() -> None:
    new_key, new_salt = "aa" * 32, "bb" * 32
    rotating = URLSigner(pairs_from_hex([new_key, DOCS_KEY], [new_salt, DOCS_SALT]))
    assert rotating.sign(DOCS_PATH) == plain_hmac_signature(new_key, new_salt, DOCS_PATH)
    rotating.verify(rotating.sign(DOCS_PATH), DOCS_PATH)
    rotating.verify(DOCS_SIGNATURE, DOCS_PATH)  # signed with the previous pair


def test_retired_pair_is_rejected() -> None:
    current = URLSigner(pairs_from_hex(["aa" * 32], ["bb" * 32]))
    with pytest.raises(InvalidSignature):
        current.verify(DOCS_SIGNATURE, DOCS_PATH)


def test_key_and_salt_are_not_interchangeable_across_pairs() -> None:
    crossed = URLSigner(pairs_from_hex([DOCS_KEY, "cc" * 8], ["dd" * 8, DOCS_SALT]))
    with pytest.raises(InvalidSignature):
        crossed.verify(DOCS_SIGNATURE, DOCS_PATH)


# Configuration errors


def test_pairs_from_hex_decodes_in_order() -> None:
    assert pairs_from_hex(["0a", "FF"], ["0b0c", "00"]) == (
        KeyPair(b"\x0a", b"\x0b\x0c"),
        KeyPair(b"\xff", b"\x00"),
    )


@pytest.mark.parametrize(
    ("keys", "salts", "message"),
    [
        (["aa"], [], "number of keys and number of salts"),
        (["zz"], ["aa"], "key #0 is not valid hex"),
        (["aa", "aa"], ["aa", "abc"], "salt #1 is not valid hex"),
        (["aa bb"], ["aa"], "key #0 is not valid hex"),
        ([""], ["aa"], "key #0 is empty"),
        (["aa"], [""], "salt #0 is empty"),
        ("aa", "bb", "not one string"),
    ],
)
def test_pairs_from_hex_rejects_bad_settings(
    keys: list[str], salts: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        pairs_from_hex(keys, salts)


def test_error_messages_and_reprs_do_not_leak_secrets() -> None:
    with pytest.raises(ValueError) as raised:
        pairs_from_hex(["5ec2e7zz"], ["aa"])
    assert "5ec2e7" not in str(raised.value)
    pairs = pairs_from_hex(["5ec2e7"], ["5a17"])
    assert "5ec2e7" not in repr(pairs) and "\\x5e" not in repr(pairs)
    assert "5ec2e7" not in repr(URLSigner(pairs))


@pytest.mark.parametrize("size", [0, 33, -1])
def test_signature_size_out_of_range(size: int) -> None:
    with pytest.raises(ValueError, match="within 1 and 32"):
        URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]), signature_size=size)


def test_no_pairs_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        URLSigner(())


# Tampering: each variant must be refused (docs/security.md, bad inputs 2-8)

LAST_CHAR_TWINS = [DOCS_SIGNATURE[:-1] + c for c in "9-_"]  # "8" = 111100; same 6 high bits
LENIENT_TWINS = [
    DOCS_SIGNATURE + "=",
    DOCS_SIGNATURE + "==",
    *LAST_CHAR_TWINS,
    DOCS_SIGNATURE[:20] + "\u00e9" + DOCS_SIGNATURE[20:],
    "\u00e9" + DOCS_SIGNATURE,
    DOCS_SIGNATURE + "\u00e9",
]


@pytest.mark.parametrize("variant", LENIENT_TWINS)
def test_variants_that_decode_to_the_same_bytes_are_rejected(
    signer: URLSigner, variant: str
) -> None:
    # The precondition is what makes the variant dangerous: a lenient decoder
    # (itsdangerous' own) maps it to the valid digest.
    assert base64_decode(variant) == base64_decode(DOCS_SIGNATURE)
    with pytest.raises(InvalidSignature):
        signer.verify(variant, DOCS_PATH)
    with pytest.raises(InvalidSignature):
        verified_rest(f"/{variant}{DOCS_PATH}", signer)


def test_last_char_twins_fail_the_canonical_check_not_the_form_check(signer: URLSigner) -> None:
    for twin in LAST_CHAR_TWINS:
        assert len(twin) == 43
        with pytest.raises(InvalidSignature, match="non-canonical"):
            signer.verify(twin, DOCS_PATH)


@pytest.mark.parametrize(
    "variant",
    [
        DOCS_SIGNATURE[:20] + "%C3%A9" + DOCS_SIGNATURE[20:],
        DOCS_SIGNATURE + "%C3%A9",
        DOCS_SIGNATURE + "%3D%3D",
        DOCS_SIGNATURE + "\n",
        " " + DOCS_SIGNATURE,
        DOCS_SIGNATURE.replace("_", "/"),
        DOCS_SIGNATURE.replace("_", "%5F"),
        "",
    ],
)
def test_other_malformed_segments_are_rejected(signer: URLSigner, variant: str) -> None:
    with pytest.raises(InvalidSignature):
        signer.verify(variant, DOCS_PATH)


@pytest.mark.parametrize("cut", range(1, 43))
def test_truncated_signatures_are_rejected(signer: URLSigner, cut: int) -> None:
    with pytest.raises(InvalidSignature):
        signer.verify(DOCS_SIGNATURE[:-cut], DOCS_PATH)


@pytest.mark.parametrize("bit", range(43 * 8))
def test_one_bit_flipped_anywhere_is_rejected(signer: URLSigner, bit: int) -> None:
    raw = bytearray(DOCS_SIGNATURE.encode("ascii"))
    raw[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(InvalidSignature):
        signer.verify(raw.decode("latin-1"), DOCS_PATH)


@pytest.mark.parametrize("bit", range(32 * 8))
def test_one_bit_flipped_in_the_digest_is_rejected(signer: URLSigner, bit: int) -> None:
    digest = bytearray(base64_decode(DOCS_SIGNATURE))
    digest[bit // 8] ^= 1 << (bit % 8)
    forged = base64.urlsafe_b64encode(bytes(digest)).rstrip(b"=").decode()
    with pytest.raises(InvalidSignature, match="does not match"):
        signer.verify(forged, DOCS_PATH)


@pytest.mark.parametrize(
    "full_path",
    [
        f"/{DOCS_SIGNATURE}/{DOCS_SIGNATURE}{DOCS_PATH}",
        f"/{DOCS_SIGNATURE}/rs:fill:300:400:0/{DOCS_SIGNATURE}/g:sm/aHR0cDovL2V4YW1w/bGUuY29tL2ltYWdl/cy9jdXJpb3NpdHku/anBn.png",
        f"/{DOCS_SIGNATURE}{DOCS_PATH}/{DOCS_SIGNATURE}",
        f"/x/{DOCS_SIGNATURE}{DOCS_PATH}",
        f"/insecure/{DOCS_SIGNATURE}{DOCS_PATH}",
    ],
)
def test_signature_pasted_again_inside_the_path_is_rejected(
    signer: URLSigner, full_path: str
) -> None:
    with pytest.raises(InvalidSignature):
        verified_rest(full_path, signer)


@pytest.mark.parametrize(
    "variant_path",
    [
        DOCS_PATH.replace("/g:sm/", "%2Fg:sm/"),
        DOCS_PATH.replace("/g:sm/", "//g:sm/"),
        DOCS_PATH + "/",
        "/g:sm/rs:fill:300:400:0" + DOCS_PATH.removeprefix("/rs:fill:300:400:0/g:sm"),
        DOCS_PATH.upper(),
    ],
)
def test_encoding_variants_of_the_path_are_rejected(signer: URLSigner, variant_path: str) -> None:
    assert variant_path != DOCS_PATH
    with pytest.raises(InvalidSignature):
        signer.verify(DOCS_SIGNATURE, variant_path)


def test_signed_path_without_the_signature_segment_is_rejected(signer: URLSigner) -> None:
    # Missing segment: the first option is taken for the signature.
    with pytest.raises(InvalidSignature):
        verified_rest(DOCS_PATH, signer)
    with pytest.raises(InvalidSignature):
        verified_rest(PLAIN_PATH, signer)


# Splitting


def test_split_signed_path() -> None:
    assert split_signed_path(f"/{DOCS_SIGNATURE}{DOCS_PATH}") == (DOCS_SIGNATURE, DOCS_PATH)
    assert split_signed_path("/sig/") == ("sig", "/")


@pytest.mark.parametrize(
    "full_path",
    ["", "/", "//rs:fit:1:1/plain/a.jpg", f"/{DOCS_SIGNATURE}", DOCS_SIGNATURE + DOCS_PATH],
)
def test_split_rejects_missing_or_empty_signature(full_path: str) -> None:
    with pytest.raises(InvalidSignature):
        split_signed_path(full_path)


# Repairs made before the signature is checked, as imgproxy makes them


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # One empty segment after the signature is dropped (imgproxy v4); two are not.
        ("//plain/a.png", "/plain/a.png"),
        ("//rs:fit:10:10/plain/a.png", "/rs:fit:10:10/plain/a.png"),
        ("///plain/a.png", "//plain/a.png"),
        ("/rs:fit:10:10//plain/a.png", "/rs:fit:10:10//plain/a.png"),
        # %3A is ':' in option segments only, and only in upper case.
        ("/rs%3Afit%3A10%3A10/w:5/plain/a.png", "/rs:fit:10:10/w:5/plain/a.png"),
        ("/rs%3afit%3a10%3a10/plain/a.png", "/rs%3afit%3a10%3a10/plain/a.png"),
        ("/w:5/plain/a%3Ab.png", "/w:5/plain/a%3Ab.png"),
        ("/w%3A5/aHR0cDovL2EvYi5wbmc.png", "/w:5/aHR0cDovL2EvYi5wbmc.png"),
        ("/w%3A5/plain%2Fx/a.png", "/w:5/plain%2Fx/a.png"),
        # A collapsed "//" after the scheme of a plain source, greedy as imgproxy's pattern.
        ("/w:5/plain/http:/example.com/a.jpg", "/w:5/plain/http://example.com/a.jpg"),
        ("/plain/http:/example.com/a:/b.jpg", "/plain/http:/example.com/a://b.jpg"),
        ("/plain/photos/a.jpg", "/plain/photos/a.jpg"),
        ("/w:5/aHR0cDovL2EvYi5wbmc.png", "/w:5/aHR0cDovL2EvYi5wbmc.png"),
        # All three at once.
        ("//w%3A5/plain/https:/example.com/a.jpg", "/w:5/plain/https://example.com/a.jpg"),
    ],
)
def test_restored_path(path: str, expected: str) -> None:
    assert restored_path(path) == expected


def test_split_signed_path_restores_the_rest() -> None:
    assert split_signed_path("/sig//w%3A5/plain/http:/e.com/a.jpg") == (
        "sig",
        "/w:5/plain/http://e.com/a.jpg",
    )


@pytest.mark.parametrize(
    ("sent", "signed"),
    [
        ("//plain/a.png", "/plain/a.png"),
        ("/rs%3Afit%3A10%3A10/plain/a.png", "/rs:fit:10:10/plain/a.png"),
        ("/rs:fit%3A10:10/plain/a.png", "/rs:fit:10:10/plain/a.png"),
        ("/plain/http:/example.com/a.jpg", "/plain/http://example.com/a.jpg"),
    ],
)
def test_the_signature_covers_the_repaired_path_only(
    signer: URLSigner, sent: str, signed: str
) -> None:
    # Signed as imgproxy signs it: the repaired spelling verifies...
    assert verified_rest(f"/{signer.sign(signed)}{sent}", signer) == signed
    # ...and a signature over the spelling as sent does not.
    with pytest.raises(InvalidSignature):
        verified_rest(f"/{signer.sign(sent)}{sent}", signer)


@pytest.mark.parametrize(
    ("sent", "signed"),
    [
        # Only what imgproxy repairs: lower-case %3a, %3A in the source, two empty
        # segments and a collapsed scheme in a percent-encoded source are not.
        ("/rs%3afit/plain/a.png", "/rs:fit/plain/a.png"),
        ("/plain/a%3Ab.png", "/plain/a:b.png"),
        ("///plain/a.png", "/plain/a.png"),
        ("/plain/http%3A/example.com/a.jpg", "/plain/http://example.com/a.jpg"),
    ],
)
def test_no_other_spelling_verifies(signer: URLSigner, sent: str, signed: str) -> None:
    with pytest.raises(InvalidSignature):
        verified_rest(f"/{signer.sign(signed)}{sent}", signer)


# Unsigned mode


@pytest.mark.parametrize("placeholder", sorted(UNSIGNED_SEGMENTS))
def test_allow_unsigned_takes_the_placeholders(signer: URLSigner, placeholder: str) -> None:
    assert verified_rest(f"/{placeholder}{PLAIN_PATH}", signer, allow_unsigned=True) == PLAIN_PATH


def test_allow_unsigned_keeps_signed_urls_working(signer: URLSigner) -> None:
    signed = signer.signed_path(PLAIN_PATH)
    assert verified_rest(signed, signer, allow_unsigned=True) == PLAIN_PATH


@pytest.mark.parametrize(
    "segment", ["", "Insecure", "UNSAFE", "unsafe ", "insecure=", "x", DOCS_SIGNATURE]
)
def test_allow_unsigned_rejects_anything_else(signer: URLSigner, segment: str) -> None:
    with pytest.raises(InvalidSignature):
        verified_rest(f"/{segment}{PLAIN_PATH}", signer, allow_unsigned=True)


@pytest.mark.parametrize("placeholder", sorted(UNSIGNED_SEGMENTS))
@pytest.mark.parametrize("size", [6, 32])
def test_signing_enabled_rejects_placeholders(placeholder: str, size: int) -> None:
    # At size 6 the signature is 8 characters, the length of "insecure".
    sized = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]), signature_size=size)
    with pytest.raises(InvalidSignature, match="unsigned placeholder"):
        sized.verify(placeholder, PLAIN_PATH)
    with pytest.raises(InvalidSignature):
        verified_rest(f"/{placeholder}{PLAIN_PATH}", sized)


# Random mutations never pass unless they change nothing

MUTATION_ALPHABET = st.characters(codec="utf-8") | st.sampled_from("=%-_+/ \n\t.")


@st.composite
def mutated_signatures(draw: st.DrawFn) -> str:
    """Apply one to four random edits to the valid docs signature."""
    chars = list(DOCS_SIGNATURE)
    for _ in range(draw(st.integers(1, 4))):
        edit = draw(st.sampled_from(["flip", "insert", "delete", "case", "replace"]))
        at = draw(st.integers(0, max(len(chars) - 1, 0)))
        if edit == "insert":
            chars.insert(draw(st.integers(0, len(chars))), draw(MUTATION_ALPHABET))
        elif not chars:
            continue
        elif edit == "flip":
            chars[at] = chr(ord(chars[at]) ^ (1 << draw(st.integers(0, 7))))
        elif edit == "delete":
            del chars[at]
        elif edit == "case":
            chars[at] = chars[at].swapcase()
        else:
            chars[at] = draw(MUTATION_ALPHABET)
    return "".join(chars)


@given(mutated=mutated_signatures())
def test_random_mutations_are_rejected_unless_identical(mutated: str) -> None:
    docs_signer = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))
    if mutated == DOCS_SIGNATURE:
        docs_signer.verify(mutated, DOCS_PATH)
        return
    with pytest.raises(InvalidSignature):
        docs_signer.verify(mutated, DOCS_PATH)


@given(path=st.text(min_size=1).map(lambda text: "/" + text))
def test_random_paths_are_rejected_unless_identical(path: str) -> None:
    assume(path != DOCS_PATH)
    docs_signer = URLSigner(pairs_from_hex([DOCS_KEY], [DOCS_SALT]))
    with pytest.raises(InvalidSignature):
        docs_signer.verify(DOCS_SIGNATURE, path)

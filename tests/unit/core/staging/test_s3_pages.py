"""Unit tests of ``airflow_provider_brev/core/staging/s3_pages.py``."""

from __future__ import annotations

import pytest

from airflow_provider_brev.core.staging.s3_pages import split_contents

PAGE = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
    b"<Name>b</Name><Prefix>ds/</Prefix><KeyCount>2</KeyCount><MaxKeys>1000</MaxKeys><IsTruncated>true</IsTruncated>"
    b"<Contents><Key>ds/a&lt;Contents&gt;.jpg</Key><LastModified>2026-01-01T00:00:00.000Z</LastModified>"
    b"<ETag>&quot;0cc175b9c0f1b6a831c399e269772661&quot;</ETag><Size>1</Size><StorageClass>STANDARD</StorageClass>"
    b"</Contents><Contents><Key>ds/b%20c</Key><ETag>&quot;abc-2&quot;</ETag><Size>20</Size></Contents>"
    b"<NextContinuationToken>tok</NextContinuationToken></ListBucketResult>"
)


def test_a_listing_page_is_split_into_its_objects_and_its_envelope():
    contents, envelope = split_contents(PAGE)
    assert contents == [
        {"Key": "ds/a<Contents>.jpg", "Size": 1, "ETag": '"0cc175b9c0f1b6a831c399e269772661"'},
        {"Key": "ds/b%20c", "Size": 20, "ETag": '"abc-2"'},
    ]
    assert b"Contents>" not in envelope.replace(b"&lt;Contents&gt;", b"")
    assert b"<NextContinuationToken>tok</NextContinuationToken>" in envelope and b"<IsTruncated>true" in envelope
    with pytest.raises(ValueError, match="Not an S3 listing page"):
        split_contents(b"<html>")


NS = b' xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'


OBJ = b"<Key>ds/a</Key><ETag>&quot;e1&quot;</ETag><Size>3</Size>"


#: (case, the ListBucketResult's attributes, its one <Contents> element's children, the objects read)
PAGES = [
    ("namespaced, as S3 sends it", NS, OBJ, [{"Key": "ds/a", "Size": 3, "ETag": '"e1"'}]),
    ("no namespace (another S3 endpoint)", b"", OBJ, [{"Key": "ds/a", "Size": 3, "ETag": '"e1"'}]),
    ("no ETag", NS, b"<Key>ds/a</Key><Size>0</Size>", [{"Key": "ds/a", "Size": 0, "ETag": ""}]),
    ("an empty ETag", NS, b"<Key>ds/a</Key><ETag></ETag><Size>1</Size>", [{"Key": "ds/a", "Size": 1, "ETag": ""}]),
    ("no Key: not an object", NS, b"<ETag>e</ETag><Size>3</Size>", []),
    ("no Size: not an object", NS, b"<Key>ds/a</Key><ETag>e</ETag>", []),
    ("a negative Size", NS, b"<Key>ds/a</Key><Size>-1</Size>", []),
    ("a Size that is not a count", NS, b"<Key>ds/a</Key><Size>1.5</Size>", []),
]


@pytest.mark.parametrize(("case", "attributes", "element", "objects"), PAGES, ids=[r[0] for r in PAGES])
def test_what_a_listing_pages_contents_element_gives(case, attributes, element, objects):
    page = (
        b"<ListBucketResult" + attributes + b"><Name>b</Name><Contents>" + element + b"</Contents></ListBucketResult>"
    )
    contents, envelope = split_contents(page)
    assert contents == objects, case
    assert envelope == b"<ListBucketResult" + attributes + b"><Name>b</Name></ListBucketResult>"

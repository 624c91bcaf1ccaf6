"""The shop web tier's media library (charts/online-shop/images/shop/shop/media.py): imported once
into an empty volume, never rewritten, and a product page describes the photo it reads."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("shop_media", ROOT / "charts/online-shop/images/shop/shop/media.py")
media = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(media)

PRODUCTS = [("OLJCESPC7Z", "Sunglasses", 1999), ("6E92ZMYYFZ", "Mug", 899)]


def test_an_empty_volume_gets_the_catalog_photos_once(tmp_path):
    assert media.import_library(PRODUCTS, tmp_path) == 2
    first = media.describe("OLJCESPC7Z", tmp_path)
    assert first["url"] == "/media/OLJCESPC7Z.svg" and first["bytes"] > 1000
    assert media.photo("OLJCESPC7Z", "Sunglasses") == (tmp_path / "OLJCESPC7Z.svg").read_bytes()
    # a library already imported is never written again: a photo lost later stays lost
    (tmp_path / "6E92ZMYYFZ.svg").unlink()
    assert media.import_library(PRODUCTS, tmp_path) == 0
    assert media.describe("6E92ZMYYFZ", tmp_path) is None
    assert media.describe("OLJCESPC7Z", tmp_path) == first
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_photos_are_the_same_on_every_install_and_differ_by_product():
    assert media.photo("OLJCESPC7Z", "Sunglasses") == media.photo("OLJCESPC7Z", "Sunglasses")
    assert media.photo("OLJCESPC7Z", "Sunglasses") != media.photo("6E92ZMYYFZ", "Mug")


def test_readiness_needs_an_imported_library_on_a_writable_volume(tmp_path):
    with pytest.raises(FileNotFoundError):
        media.check(tmp_path)
    media.import_library(PRODUCTS, tmp_path)
    media.check(tmp_path)
    assert not (tmp_path / ".ready").exists()

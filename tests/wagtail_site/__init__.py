"""A Wagtail site for tests/test_wagtail.py (tests/wagtail_settings.py installs it)."""

"""sorl-thumbnail's state between the Oscar shop's tests (only imported in its own pytest).

Here, not in tests/test_oscar.py: the files beside the test settings module
are what ``oximg_migration_scan`` reads of this project, and it rightly
reports any import of sorl-thumbnail there.
"""

from __future__ import annotations

from django.utils.functional import empty
from sorl.thumbnail import default


def forget_storage() -> None:
    """sorl-thumbnail keeps the first test's media storage: take it anew."""
    default.storage._wrapped = empty

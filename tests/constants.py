"""Values the test modules share, stated once: signing keys, the signer, sizes, bounds.

``KEY`` and ``SALT`` are the test settings' own (tests/settings.py reads them
from here), so a URL signed with :data:`SIGNER` verifies in the Django
layer, in the core and in a gunicorn started by the tests alike. They are
imgproxy's example key and salt (``examples/signature.py``), so the same
pair also checks compatibility with the signatures imgproxy publishes.
"""

from __future__ import annotations

from django_oximg.core.options.signing import URLSigner, pairs_from_hex

#: imgproxy's example key and salt (hex), as in its ``examples/signature.py``.
KEY = "943b421c9eb07c830af81030552c86009268de4e532ba2ee2eab8247c6da0881"
SALT = "520f986b998545b4785e0defbc4f3c1203f22de2374a3d53cb7a7fe9fea309c5"

#: The signer of :data:`KEY` and :data:`SALT`.
SIGNER = URLSigner(pairs_from_hex([KEY], [SALT]))

#: The key and salt of imgproxy's documentation ("Signing a URL"): "secret" and
#: "hello", hex-encoded, for its published signatures.
DOCS_KEY, DOCS_SALT = "736563726574", "68656C6C6F"

MIB = 1024 * 1024

#: Generous bound for threads that must finish; never reached when the code works.
JOIN_TIMEOUT = 60.0

"""A django-oscar shop for tests/test_oscar.py: Oscar's URLs and django-oximg's view."""

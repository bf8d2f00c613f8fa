"""A model with an ImageField for bench/page_renders.py and bench/page_bytes.py.

The pages' photos, as a site has them.
"""

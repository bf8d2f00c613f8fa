"""A model with an ImageField for bench/page_renders.py: the page's photos, as a site has them."""

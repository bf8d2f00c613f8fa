"""The benchmark behind ``manage.py oximg_bench``, kept out of the request path.

Nothing that serves a request imports this package (a test imports the
request-path entry points in a new process and checks ``sys.modules``): it
brings gunicorn's command line, matplotlib, a bare-libvips contender and
timing loops that a serving process has no use for. ``oximg_bench`` is a
thin command over these modules; the repository's ``bench/`` scripts share
the server start and stop in :mod:`.gunicorn` and the timed loop in
:mod:`.measure`.

- :mod:`.measure`: timed loops on threads and their figures;
- :mod:`.sources`: the run's source images (named, or drawn and saved);
- :mod:`.bare_libvips`: the ceiling, libvips' thumbnail and saver alone;
- :mod:`.misses`: the miss contenders, run in-process;
- :mod:`.gunicorn`: a gunicorn (or any server) started on 127.0.0.1 and stopped;
- :mod:`.served`: the same misses over HTTP through the site's WSGI application;
- :mod:`.hits`: cache hits through each way in, against whitenoise;
- :mod:`.pages`: the page of ``{% thumbnail %}`` tags and its timing (Django only);
- :mod:`.page_runs`: ``--pages``: the page's sources and the run;
- :mod:`.report`: the tables and the chart.
"""

"""One request, start to finish: the handler, the miss's steps, the answer."""

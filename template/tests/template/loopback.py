# Owned by the template: changes here are overwritten by `copier update`. Put your own tests in new files.
"""The tests' HTTP calls to the servers they start on loopback: httpx's own functions, with one TLS context.

httpx builds an SSL context for every client it makes, and httpx.get(), post() and stream() each make a client:
loading the CA bundle into it costs about 20 ms of CPU, though these servers speak plain HTTP. Over the suite that
was a quarter of the test processes' CPU (712 loads in one run). These share one context, built once.
"""

from __future__ import annotations

import functools

import httpx

TLS = httpx.create_ssl_context()  # what httpx builds for each client; an http:// URL never uses it

get = functools.partial(httpx.get, verify=TLS)
post = functools.partial(httpx.post, verify=TLS)
delete = functools.partial(httpx.delete, verify=TLS)
stream = functools.partial(httpx.stream, verify=TLS)
Client = functools.partial(httpx.Client, verify=TLS)

"""This repository's service: the agents of ./agents served by `sentient_assist`.

`app.main:app` is its ASGI app and `python -m app serve` runs it from a checkout. The
framework is the installed package `sentient_assist`; this folder is not part of it.
"""

"""Test helpers shipped for users' own tests too: faithful fake vendor upstreams
on 127.0.0.1 with fault injection (``tokenwire.testing.upstream``), each vendor's
wire rendering in its own module.
"""

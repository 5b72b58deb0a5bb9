"""protos: the wire contract (``yarnarbiter.v1``) and its generated stubs.

Placeholder package of the design card's layout; the gRPC arbiter issue adds the ``.proto``
files and the one command that regenerates the stubs.
"""

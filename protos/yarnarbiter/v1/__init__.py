"""yarnarbiter.v1: generated stubs of arbiter.proto (do not edit; run `make protos`)."""

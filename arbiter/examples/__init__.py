"""Example application masters that bid for GPU leases through the Agent library."""

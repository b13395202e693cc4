"""The frontier: per-host queues, host table, sample -> score -> rank -> deepen policies, durable storage."""

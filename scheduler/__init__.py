"""The frontier (later issue): per-host queues, host table, sample -> score -> rank -> deepen policy."""

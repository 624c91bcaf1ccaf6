"""An event pipeline: ingest -> NATS JetStream -> processor -> PostgreSQL, read through a Redis cache."""

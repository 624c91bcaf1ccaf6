"""A small service kit: settings from env, JSON logs with request ids, Prometheus metrics,
OpenTelemetry traces over OTLP/HTTP, health probes, downstream calls with timeouts/retries, and the
data-store clients the apps share (PostgreSQL pool, Redis, NATS JetStream work queues)."""

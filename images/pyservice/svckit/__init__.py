"""A small service kit: settings from env, JSON logs with request ids, Prometheus metrics,
OpenTelemetry traces over OTLP/HTTP, health probes, and downstream calls with timeouts/retries."""

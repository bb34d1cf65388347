// Package telemetry sets up a process's tracing and logging: an
// OpenTelemetry tracer provider configured only by the standard OTEL_*
// environment variables (off unless an exporter is configured), the W3C
// trace-context propagator, a log/slog handler that stamps trace and span
// ids onto every record logged with a context, and PrintfLogger, which
// routes an embedded engine's printf-style messages (pebble's) into slog.
package telemetry

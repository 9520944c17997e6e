package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/opsgate/opsgate/config"
	"github.com/opsgate/opsgate/core/telemetry"
)

// traceFlushTimeout bounds how long shutdown waits for the last spans.
const traceFlushTimeout = 5 * time.Second

// startTraces turns on OpenTelemetry traces when telemetry.otlp_endpoint
// or OTEL_EXPORTER_OTLP_ENDPOINT is set (docs/telemetry.md) and returns
// what flushes them at shutdown.
func startTraces(ctx context.Context, cfg *config.Config, log *slog.Logger) (func(), error) {
	shutdown, on, err := telemetry.Setup(ctx, telemetry.Config{
		Endpoint: cfg.Telemetry.OTLPEndpoint, ServiceName: cfg.Telemetry.ServiceName, Getenv: os.Getenv})
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	if on {
		log.Info("traces exported over OTLP/HTTP", "otlp_endpoint", cfg.Telemetry.OTLPEndpoint,
			"env", os.Getenv(telemetry.EnvEndpoint), "service_name", cfg.Telemetry.ServiceName)
	}
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushTimeout)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}, nil
}

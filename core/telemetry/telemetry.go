// Package telemetry holds opsgate's OpenTelemetry traces: the exporter main
// builds (OTLP/HTTP, off unless telemetry.otlp_endpoint or
// OTEL_EXPORTER_OTLP_ENDPOINT is set) and the small helpers the gate, the
// engine, the model clients and the MCP server use to make spans of one
// request's trace (docs/telemetry.md).
//
// Spans are made through the otel global tracer provider, which main sets
// once: while tracing is off it is the SDK-less default, whose spans record
// nothing and export nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// EnvEndpoint is the standard OpenTelemetry variable that turns traces on
// when telemetry.otlp_endpoint is unset.
const EnvEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// instrumentation names opsgate's tracer.
const instrumentation = "github.com/opsgate/opsgate"

// Config is what Setup needs: telemetry.otlp_endpoint and
// telemetry.service_name.
type Config struct {
	// Endpoint is the collector's OTLP/HTTP base URL; traces are posted to
	// <Endpoint>/v1/traces. "" defers to OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint    string
	ServiceName string
	// Getenv reads the environment (os.Getenv; tests pass their own).
	Getenv func(string) string
}

// Setup turns traces on when an endpoint is configured: it sets the global
// tracer provider (batching spans to the OTLP/HTTP exporter) and the W3C
// trace-context propagator, and returns the function that flushes and
// stops them. With no endpoint it changes nothing and returns a no-op
// shutdown and enabled false: no exporter, no goroutine, no cost beyond a
// non-recording span per call site.
func Setup(ctx context.Context, c Config) (shutdown func(context.Context) error, enabled bool, err error) {
	noop := func(context.Context) error { return nil }
	getenv := c.Getenv
	if getenv == nil {
		return noop, false, errors.New("telemetry: Getenv is required")
	}
	var opts []otlptracehttp.Option
	switch {
	case c.Endpoint != "":
		u, perr := url.Parse(c.Endpoint)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return noop, false, fmt.Errorf("telemetry: otlp_endpoint %q is not an http(s) URL", c.Endpoint)
		}
		// Like OTEL_EXPORTER_OTLP_ENDPOINT, the configured URL is the
		// collector's base: the signal path is appended.
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
	case getenv(EnvEndpoint) != "":
		// The exporter reads OTEL_EXPORTER_OTLP_* itself.
	default:
		return noop, false, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return noop, false, fmt.Errorf("telemetry: otlp exporter: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "opsgate"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName(name)))
	if err != nil {
		return noop, false, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func(ctx context.Context) error {
		// Off again: later spans are no-ops and On reports false.
		otel.SetTracerProvider(tracenoop.NewTracerProvider())
		return tp.Shutdown(ctx)
	}, true, nil
}

// Tracer is opsgate's tracer from the global provider Setup set.
func Tracer() trace.Tracer {
	return otel.Tracer(instrumentation)
}

// Start starts a span of opsgate's tracer; a shorthand for call sites.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return Tracer().Start(ctx, name, opts...)
}

// End records err (when not nil) on span and ends it.
func End(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Traceparent is ctx's span context as a W3C traceparent header value ("" when
// ctx carries no valid span context).
func Traceparent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	return carrier.Get("traceparent")
}

// WithTraceparent returns ctx continuing the trace traceparent names (a
// client's W3C header, or one stored with a run), unless ctx already
// carries a span context or traceparent is malformed: then ctx unchanged.
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

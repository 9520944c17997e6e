// Package webhook is the inbound channel for systems rather than people:
// alerting (Alertmanager, Grafana), CI and scripts POST a signed JSON body
// to /hooks/{name} and opsgate treats it as a chat message from the actor
// "webhook:<name>", so the same flows, policy and approvals apply.
//
// A request is trusted only with X-Opsgate-Signature: sha256=<hex> equal to
// HMAC-SHA256(secret, raw body). The command line is the body's "text"
// field or a per-hook text/template over the body. The dedup key is the
// body's "event_id" field when present, else the body's SHA-256: only the
// signed body counts, so a replayed request starts nothing.
//
// There is no platform to answer: the adapter's Platform records replies
// and cards in the outbox (like the console), where the API and console
// show them; approvals are decided from any other surface.
package webhook

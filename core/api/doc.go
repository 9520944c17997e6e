// Package api serves opsgate's HTTP API v1 (CONTRACT.md, "API v1"): the
// surface that scripts, the admin CLI and the web console use to send
// console messages, follow runs over Server-Sent Events, decide approvals,
// read the audit log and requeue dead deliveries.
//
// The package consumes two small interfaces it declares itself (Engine and
// Store), so it depends on the core's types but not on the concrete engine
// or store, and can be tested against fakes as well as the real thing.
//
// Request rules, applied to every path the handler serves:
//
//   - Authorization: "Bearer <token>" is required on every request,
//     including unknown paths (so an anonymous caller cannot probe routes).
//     Tokens are compared in constant time against every configured token.
//     A missing, malformed or wrong token is 401.
//   - Errors are always JSON: {"error":{"code":"...","message":"..."}},
//     plus "field" when one input value is to blame, and "by"/"at" for a
//     decision that lost to an earlier one (409).
//   - Bodies are capped at Options.MaxBodyBytes (default 1 MiB): 413.
//   - Malformed JSON, trailing data after the object, an empty body, and
//     unknown fields are 400 (an unknown field is most often a typo such as
//     "arg" for "args", and silently ignoring it would approve something
//     other than what the caller meant). A well-formed body or query with
//     invalid values (a wrong type, a missing required field, an unknown
//     status) is 422 with "field".
//   - Unknown paths are 404, a known path with the wrong method is 405 with
//     an Allow header.
//
// The handler serves absolute paths under /api/v1/; mount it without
// stripping the prefix: mux.Handle("/api/v1/", h).
package api

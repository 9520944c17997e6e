// Package api serves opsgate's HTTP API v1 (the README's "HTTP API"; docs/architecture.md): the
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
// Endpoints (lists are {"items":[...],"next_cursor":"..."}; pass
// next_cursor back as ?cursor= for the next page, "" means the last page;
// limit defaults to 50, at most 200, audit 100/1000):
//
//	POST /api/v1/messages                 {"thread","text","event_id"?} → 201 {"event_id","duplicate","run"}
//	                                      (200 when no run started or event_id was seen before;
//	                                      "thread" is the console thread key, "console:" prefix optional;
//	                                      text over 16 KiB → 413)
//	GET  /api/v1/runs                     ?status=&thread=<channel>:<key>&limit=&cursor=
//	GET  /api/v1/runs/{id}
//	POST /api/v1/runs/{id}/cancel         → the run; 409 already_final
//	GET  /api/v1/runs/{id}/events         Server-Sent Events, see runEvents
//	GET  /api/v1/approvals                ?status=&run_id=&limit=&cursor=
//	GET  /api/v1/approvals/{id}
//	POST /api/v1/approvals/{id}/decision  {"action","args","reason","scope"} → the approval;
//	                                      409 already_decided (message and "by" name the winner),
//	                                      403 not_approver|self_approval|denied_by_policy,
//	                                      410 expired, 422 invalid_args (+"field"), 404 not_found
//	GET  /api/v1/events                   ?kinds=approvals,runs: Server-Sent Events of the queue,
//	                                      snapshot first, then changes (see changes)
//	GET  /api/v1/me                       → {"actor","name","scopes"} of the token
//	GET  /api/v1/audit                    ?after=|cursor=&limit=&actor=&tool=&run_id=&approval_id=
//	GET  /api/v1/audit/verify             → {"ok","first_bad_seq","problem","head_seq","head_hash"}
//	GET  /api/v1/deliveries               ?status=dead|pending|sent&limit=&cursor=
//	POST /api/v1/deliveries/{id}/requeue  → {"id","status":"pending"}; 409 not_dead
//	GET  /api/v1/schedules                → {"items":[{"name","cron","timezone","thread","next_at","last_at","paused",…}]}
//	POST /api/v1/schedules/{name}/run     → {"name","tick_at","status","reason","run"}; 409 overlap (scope admin)
//	POST /api/v1/schedules/{name}/pause   → the schedule (scope admin); …/resume likewise
//
// The Agent API (scope session.run; agent.go, agentturn.go; docs/agent-api.md):
//
//	POST /api/v1/agent/sessions           {"agent"?} → 201 {"session_id","agent","created_at"}
//	GET  /api/v1/agent/sessions           this token's sessions
//	GET  /api/v1/agent/sessions/{id}      a session with its turns (read it before re-sending)
//	POST /api/v1/agent/runs               {"text","session_id"?,"agent"?,"model"?} → SSE with
//	                                      Accept: text/event-stream, else the result; 429 queue_full,
//	                                      409 session_busy
//	GET  /api/v1/agent/turns/{id}         a turn's result
//	POST /api/v1/agent/turns/{id}/cancel  → the result (aborted); 409 turn_finished
//	POST /api/v1/agent/reply              {"session_id","request_id","decision":"allowOnce"|"deny"}
//	POST /api/v1/agent/answer             {"session_id","request_id","answers"} → like runs
//	GET  /api/v1/agent/models, /api/v1/agent/agents
//
// Decisions made through the API are recorded with channel "console" (the
// API is the console's back end) and the token's actor.
//
// The handler serves absolute paths under /api/v1/; mount it without
// stripping the prefix: mux.Handle("/api/v1/", h).
package api

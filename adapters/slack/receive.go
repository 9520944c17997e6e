package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/opsgate/opsgate/core"
)

// Events handles POST /slack/events: the Events API. It answers the
// url_verification challenge, and records app_mention and message events
// (deduplicated on event_id, so Slack's retries never start a second run)
// before answering 200.
func (a *Adapter) Events() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, release, ok := a.readVerified(w, r)
		if !ok {
			return
		}
		env, err := parseEnvelope(body)
		if err != nil {
			release()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if env.Type == "url_verification" {
			writeJSON(w, http.StatusOK, map[string]string{"challenge": env.Challenge})
			return
		}
		ans := a.handleEnvelope(r.Context(), env, body)
		if ans.status >= 300 {
			release()
		}
		a.write(w, ans)
	})
}

// handleEnvelope records one event_callback; other envelope types
// (app_rate_limited, …) are acknowledged and ignored.
func (a *Adapter) handleEnvelope(ctx context.Context, env eventEnvelope, raw []byte) answer {
	if env.Type != "event_callback" {
		return answerOK
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.AckBudget)
	defer cancel()
	ev, ok, err := normalizeEvent(env, raw, eventContext{
		botUserID:   a.botUser(ctx, &env),
		knownThread: func(k string) bool { return a.knownThread(ctx, k) },
		now:         a.now(),
	})
	if err != nil {
		return answer{status: http.StatusBadRequest, body: errorBody(err)}
	}
	if !ok {
		return answerOK
	}
	rc, err := a.sink.HandleEvent(ctx, ev)
	if err != nil {
		a.log.ErrorContext(ctx, "slack: record event", "event_id", env.EventID, "err", err)
		return ingressAnswer(err)
	}
	if !rc.Duplicate {
		// The event's record makes the thread known durably (ThreadSeen);
		// the in-memory set spares the lookup.
		a.threads.add(ev.Thread.Key)
	}
	return answerOK
}

// Commands handles POST /slack/commands: slash commands such as
// `/ops deploy api 1.2.3`. See handleSlash for how the run's thread is made.
func (a *Adapter) Commands() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, release, ok := a.readVerified(w, r)
		if !ok {
			return
		}
		c, err := parseSlashForm(body)
		if err != nil {
			release()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ans := a.handleSlash(r.Context(), c)
		if ans.status >= 300 {
			release()
		}
		a.write(w, ans)
	})
}

// Interactivity handles POST /slack/interactivity: card buttons and modal
// submissions.
func (a *Adapter) Interactivity() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, release, ok := a.readVerified(w, r)
		if !ok {
			return
		}
		in, raw, err := parseInteractionForm(body)
		if err != nil {
			release()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ans := a.handleInteraction(r.Context(), in, raw)
		if ans.status >= 300 {
			release()
		}
		a.write(w, ans)
	})
}

// readVerified reads and verifies a request, answering it itself when it
// fails: 400 for an oversize or unreadable body, 401 for a bad, stale or
// replayed signature. Nothing is recorded in either case.
func (a *Adapter) readVerified(w http.ResponseWriter, r *http.Request) ([]byte, func(), bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, nil, false
	}
	body, release, err := a.verify.readVerified(r, a.cfg.MaxBodyBytes)
	if err == nil {
		return body, release, true
	}
	status := http.StatusUnauthorized
	if !errors.Is(err, ErrBadSignature) && !errors.Is(err, ErrStale) && !errors.Is(err, ErrReplay) {
		status = http.StatusBadRequest
	}
	a.log.WarnContext(r.Context(), "slack: refused request", "path", r.URL.Path, "status", status, "err", err)
	http.Error(w, err.Error(), status)
	return nil, nil, false
}

func (a *Adapter) write(w http.ResponseWriter, ans answer) {
	if ans.body == nil {
		w.WriteHeader(ans.status)
		return
	}
	writeJSON(w, ans.status, ans.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func errorBody(err error) map[string]string { return map[string]string{"error": err.Error()} }

// ingressAnswer is the answer when the sink could not take a request: 400
// for input opsgate refuses to keep, 503 while the store is unavailable
// (Slack retries it), 500 otherwise; see core.IngressStatus.
func ingressAnswer(err error) answer {
	if msg := core.IngressMessage(err); msg != "" {
		return answer{status: core.IngressStatus(err), body: map[string]string{"error": msg}}
	}
	return answer{status: http.StatusInternalServerError}
}

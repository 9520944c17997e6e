package signal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/lease"
	"github.com/opsgate/opsgate/core/sse"
)

func (a *Adapter) lastEventKey() string { return "signal:last-event:" + a.cfg.Account }
func (a *Adapter) leaseName() string    { return "signal:events:" + a.cfg.Account }
func (a *Adapter) codeKey(code string) string {
	return "signal:code:" + a.cfg.Account + ":" + code
}
func (a *Adapter) cardKey(ts int64) string {
	return "signal:card:" + a.cfg.Account + ":" + strconv.FormatInt(ts, 10)
}

const leaseTTL = time.Minute

// Run implements core.Runner: under the stream lease it reads
// /api/v1/events, hands each envelope to the sink, and stores the event's
// id once recorded, reconnecting with Last-Event-ID after any failure.
func (a *Adapter) Run(ctx context.Context) error {
	defer func() { _ = a.reader.Release(ctx) }()
	backoff := time.Second
	for ctx.Err() == nil {
		err := a.readStream(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := backoff
		if errors.Is(err, lease.ErrHeld) {
			wait = a.reader.Retry()
		} else {
			a.log.Warn("event stream ended; reconnecting", "in", wait, "err", err)
			backoff = min(backoff*2, time.Minute)
		}
		if sleep(ctx, wait) != nil {
			return nil
		}
	}
	return nil
}

func (a *Adapter) holdLease(ctx context.Context) error {
	if err := a.reader.Hold(ctx); err != nil {
		return fmt.Errorf("signal: event stream: %w", err)
	}
	return nil
}

func (a *Adapter) readStream(ctx context.Context) error {
	if err := a.holdLease(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.DaemonURL+"/api/v1/events?account="+url.QueryEscape(a.cfg.Account), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last, err := a.reader.Position(ctx); err == nil && last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := a.stream.Do(req)
	if err != nil {
		return fmt.Errorf("signal: connect to the event stream: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("signal: event stream: HTTP %d", resp.StatusCode)
	}
	a.log.Info("reading signal-cli's event stream", "account", a.cfg.Account)
	keepAlive := func() {
		if err := a.holdLease(ctx); err != nil {
			cancel(err)
		}
	}
	rd := sse.NewReader(resp.Body)
	rd.OnComment(keepAlive) // signal-cli's ":" keep-alives renew the lease
	err = a.readEvents(ctx, rd, keepAlive)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return err
}

// readEvents hands each "receive" event of the stream to the sink and
// stores its id once recorded, until the stream ends.
func (a *Adapter) readEvents(ctx context.Context, rd *sse.Reader, keepAlive func()) error {
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("signal: event stream: %w", err)
		}
		if ev.Type != "message" && ev.Type != "receive" {
			continue
		}
		if err := a.handleData(ctx, ev.Data); err != nil {
			return err
		}
		keepAlive()
		if ev.ID != "" {
			// Not cut by a shutdown (Advance): the envelope is recorded,
			// so its id must be too, or the next reader would replay it.
			if err := a.reader.Advance(ctx, ev.ID); err != nil {
				return fmt.Errorf("signal: event stream: %w", err)
			}
		}
	}
}

// handleData turns one received envelope into at most one event for the
// sink, and answers what must be answered. It returns an error only when
// the envelope must be read again (the sink failed); forged, malformed,
// misdirected and refused input is done with.
func (a *Adapter) handleData(ctx context.Context, data []byte) error {
	rv, err := parseReceive(data)
	if err != nil {
		a.log.Warn("ignored malformed event", "err", err)
		return nil
	}
	e := rv.Envelope
	d := e.DataMessage
	if d == nil || e.sender() == a.cfg.Account || (rv.Account != "" && rv.Account != a.cfg.Account) {
		return nil // receipts, typing, sync copies of our own sends, other accounts
	}
	k := threadKey{User: e.sender()}
	if d.GroupInfo != nil {
		if !a.groups[d.GroupInfo.GroupID] {
			a.log.Warn("ignored a message from a group not listed in channels.signal.groups", "group", d.GroupInfo.GroupID)
			return nil
		}
		k = threadKey{Group: d.GroupInfo.GroupID}
	}
	ev := core.ChannelEvent{
		Channel: ChannelName, EventID: e.sender() + ":" + strconv.FormatInt(e.Timestamp, 10),
		Actor:  core.Actor{ID: ChannelName + ":" + e.sender(), Name: e.SourceName},
		Thread: core.Thread{Channel: ChannelName, Key: k.String()}, Raw: json.RawMessage(data), ReceivedAt: a.now().UTC(),
	}
	if r := d.Reaction; r != nil {
		act := reactionAction(r.Emoji)
		if r.IsRemove || act == "" || r.TargetAuthorNumber != a.cfg.Account {
			return nil
		}
		id, err := a.lookup(ctx, a.cardKey(r.TargetSentTimestamp))
		if err != nil || id == "" {
			return err // a reaction to anything but a card is no decision
		}
		return a.decide(ctx, k, ev, id, decisionText{Action: act})
	}
	text := strings.TrimSpace(d.Message)
	files := attachmentsOf(k, d)
	if text == "" && len(files) == 0 {
		return nil
	}
	if len(text) > maxMessageBytes {
		a.notify(ctx, k, fmt.Sprintf("⚠️ That message is too long for opsgate (%d bytes; at most %d). Nothing was started.", len(text), maxMessageBytes))
		return nil
	}
	quotesBot := d.Quote != nil && d.Quote.AuthorNumber == a.cfg.Account
	if ref, ok := core.ParseApproveAll(text); ok && len(files) == 0 {
		return a.approveAll(ctx, k, ev, ref, d)
	}
	if dt, ok := parseDecision(text); ok && len(files) == 0 {
		var approval string
		if dt.Code != "" {
			if approval, err = a.lookup(ctx, a.codeKey(dt.Code)); err != nil {
				return err
			}
		}
		if approval == "" {
			if q := d.Quote; q != nil && q.AuthorNumber == a.cfg.Account {
				if approval, err = a.lookup(ctx, a.cardKey(q.ID)); err != nil {
					return err
				}
				// The quoted card's own words carry its code: the card
				// may be quoted before its timestamp was stored.
				if m := quotedCodeRE.FindStringSubmatch(q.Text); approval == "" && m != nil {
					if approval, err = a.lookup(ctx, a.codeKey(m[1])); err != nil {
						return err
					}
				}
			}
		}
		switch {
		case approval != "":
			return a.decide(ctx, k, ev, approval, dt)
		case dt.Code != "":
			a.notify(ctx, k, "❓ No approval has the code "+dt.Code+".")
			return nil
		case d.Quote != nil || d.GroupInfo == nil:
			a.notify(ctx, k, "❓ Which approval? Reply \""+dt.Action+" CODE\" with the code on the card, or quote the card.")
			return nil
		}
	}
	req, ok := requestText(text, d.GroupInfo != nil)
	if !ok && quotesBot {
		// Quoting the bot addresses it, in a group too: the answer to its
		// question, the next turn of its conversation.
		req, ok = text, true
	}
	if !ok {
		return nil
	}
	ev.Text, ev.Attachments = req, files
	if quotesBot {
		ev.ReplyTo = &core.MessageRef{Channel: ChannelName, ID: messageRef(k, d.Quote.ID)}
	}
	if _, err := a.sink.HandleEvent(ctx, ev); err != nil {
		if errors.Is(err, core.ErrInvalidInput) { // retrying cannot help: drop it
			a.log.Warn("signal: message refused", "event_id", ev.EventID, "err", err)
			return nil
		}
		return fmt.Errorf("signal: record message %s: %w", ev.EventID, err)
	}
	return nil
}

var quotedCodeRE = regexp.MustCompile(`Code ([A-Z2-9]{4,8}):`)

// requestText strips Signal's addressing habit: "!ops deploy …" (or
// "/ops …") anywhere; in a direct conversation plain text is a request
// too, in a group it is ignored.
func requestText(text string, group bool) (string, bool) {
	for _, p := range []string{"!ops", "/ops"} {
		if len(text) >= len(p) && strings.EqualFold(text[:len(p)], p) && (len(text) == len(p) || strings.ContainsAny(text[len(p):len(p)+1], " \n\t")) {
			rest := strings.TrimSpace(text[len(p):])
			if rest == "" {
				rest = "help"
			}
			return rest, true
		}
	}
	if group {
		return "", false
	}
	return text, true
}

// lookup reads an approval id stored under key, "" when there is none.
func (a *Adapter) lookup(ctx context.Context, key string) (string, error) {
	b, err := a.store.StateGet(ctx, key)
	if errors.Is(err, core.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("signal: read %s: %w", key, err)
	}
	return string(b), nil
}

func (a *Adapter) decide(ctx context.Context, k threadKey, ev core.ChannelEvent, approvalID string, d decisionText) error {
	if d.Problem != "" {
		a.notify(ctx, k, "⚠️ Arguments not accepted: "+d.Problem)
		return nil
	}
	ev.Decision = &core.Decision{ApprovalID: approvalID, Action: approvals.Action(d.Action), Reason: d.Reason, Args: d.Args}
	rc, err := a.sink.HandleEvent(ctx, ev)
	var de *core.DecisionError
	switch {
	case errors.As(err, &de):
		a.notify(ctx, k, core.RefusalText(de))
	case err != nil:
		return fmt.Errorf("signal: record %s decision %s: %w", d.Action, ev.EventID, err)
	case !rc.Duplicate && rc.ApprovalStatus == string(approvals.StatusPending):
		a.notify(ctx, k, core.AckText(rc))
	}
	return nil
}

// approveAll records the approve-all command: ref is the card's code or
// approval id, or empty when the message quotes the card.
func (a *Adapter) approveAll(ctx context.Context, k threadKey, ev core.ChannelEvent, ref string, d *dataMessage) error {
	approval := ""
	var err error
	switch {
	case validCode(ref):
		approval, err = a.lookup(ctx, a.codeKey(ref))
	case ref == "" && d.Quote != nil && d.Quote.AuthorNumber == a.cfg.Account:
		approval, err = a.lookup(ctx, a.cardKey(d.Quote.ID))
	}
	if err != nil {
		return err
	}
	if approval == "" {
		approval = ref // a full approval id, judged by the engine
	}
	if approval == "" {
		a.notify(ctx, k, "❓ Which card? Send \""+core.ApproveAllCommand("CODE")+"\" with the code on the card, or quote the card.")
		return nil
	}
	return a.decide(ctx, k, ev, approval, decisionText{Action: string(core.ActionApproveAll)})
}

// notify sends a short answer outside the outbox (a refusal nothing needs
// to remember); failures are logged, not retried.
func (a *Adapter) notify(ctx context.Context, k threadKey, text string) {
	if _, err := a.send(ctx, k, text, 0); err != nil {
		a.log.Warn("send notice", "thread", k.String(), "err", err)
	}
}

// decisionText is a message's words as a decision: "approve [CODE]",
// "reject [CODE][: reason]", "edit [CODE] {json}".
type decisionText struct {
	Action, Code, Reason string
	Args                 map[string]any
	Problem              string
}

func parseDecision(text string) (decisionText, bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	word, colon := strings.CutSuffix(word, ":")
	act := strings.ToLower(word)
	switch act {
	case "approve", "reject", "edit":
	default:
		return decisionText{}, false
	}
	d := decisionText{Action: act}
	rest = strings.TrimSpace(rest)
	if !colon {
		c, after, _ := strings.Cut(rest, " ")
		c = strings.TrimSuffix(c, ":") // "reject ABCD: reason"
		if validCode(c) {
			d.Code, rest = c, strings.TrimSpace(after)
		}
	}
	rest = strings.TrimSpace(strings.TrimPrefix(rest, ":"))
	switch act {
	case "approve":
		if rest != "" {
			return decisionText{}, false
		}
	case "reject":
		d.Reason = rest
	case "edit":
		args, err := parseArgs(rest)
		if err != nil {
			d.Problem = err.Error()
		}
		d.Args = args
	}
	return d, true
}

func parseArgs(s string) (map[string]any, error) {
	if s == "" {
		return nil, fmt.Errorf(`give the new arguments as one JSON object, e.g. edit CODE {"version": "1.2.4"}`)
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("not a valid JSON object: %v", err)
	}
	if dec.More() || m == nil {
		return nil, fmt.Errorf("not one JSON object")
	}
	return m, nil
}

func reactionAction(emoji string) string {
	switch strings.TrimSuffix(emoji, "\ufe0f") {
	case "✅", "👍", "✔":
		return "approve"
	case "❌", "👎", "✖":
		return "reject"
	}
	return ""
}

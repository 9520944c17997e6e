// Package chat is `opsgate chat`: a thread of the local channel in the
// terminal. What you type is sent as a message of channel "local" (with
// your token's actor); replies, cards and their outcomes stream back
// inline; /approve, /reject and /edit decide the thread's card in place,
// through the same checks as any decision (docs/terminal.md).
//
// Session holds the conversation and does the work; the line loop (pipes,
// scripts) and the Bubble Tea prompt (terminals) only move text in and
// out of it.
package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/internal/client"
)

// StreamMessage is one message of GET /local/v1/stream (adapters/local).
type StreamMessage struct {
	Direction  string     `json:"direction"`
	ID         string     `json:"id"`
	Actor      string     `json:"actor,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	Text       string     `json:"text"`
	ApprovalID string     `json:"approval_id,omitempty"`
	RunID      string     `json:"run_id,omitempty"`
	At         time.Time  `json:"at"`
	Card       *core.Card `json:"card,omitempty"`
}

// ErrQuit is returned by Handle for /quit.
var ErrQuit = errors.New("quit")

// Session is one thread's conversation.
type Session struct {
	c      *client.Client
	thread string // "local:<key>"
	me     *client.Me
	now    func() time.Time

	mu    sync.Mutex
	cards map[string]*core.Card // by approval id, as last streamed
	order []string              // approval ids, oldest first
	mine  map[string]bool       // event ids this session sent
	runs  map[string]bool       // runs this session started
	seen  map[string]bool       // stream message ids shown
	// replied and carded are the runs with a reply or a card shown.
	replied, carded map[string]bool
	// ansi styles replies for a terminal (Terminal sets it); otherwise
	// their Markdown is rendered as plain text.
	ansi bool
}

// NewSession opens a session on thread (a key, or "local:<key>").
func NewSession(c *client.Client, me *client.Me, thread string, now func() time.Time) *Session {
	if now == nil {
		now = time.Now
	}
	thread = strings.TrimPrefix(strings.TrimSpace(thread), "local:")
	return &Session{c: c, me: me, thread: "local:" + thread, now: now, cards: map[string]*core.Card{},
		mine: map[string]bool{}, runs: map[string]bool{}, seen: map[string]bool{},
		replied: map[string]bool{}, carded: map[string]bool{}}
}

// Thread is the session's thread, "local:<key>".
func (s *Session) Thread() string { return s.thread }

// Follow streams the thread until ctx ends, calling out with the lines of
// each new message; it reconnects (with the last messages as history,
// shown once) when the stream is lost. ready is called after each
// connection's history.
func (s *Session) Follow(ctx context.Context, history int, out func(lines []string), ready func()) error {
	for attempt := 0; ctx.Err() == nil; attempt++ {
		q := url.Values{"thread": {s.thread}, "history": {fmt.Sprint(history)}}
		err := s.c.Events(ctx, "/local/v1/stream", q, "", func(ev client.Event) error {
			switch ev.Type {
			case "ready":
				attempt = 0
				if ready != nil {
					ready()
				}
			case "message":
				var m StreamMessage
				if json.Unmarshal(ev.Data, &m) != nil {
					return nil
				}
				if lines := s.Render(m); len(lines) > 0 {
					out(lines)
				}
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		switch client.StatusOf(err) {
		case 401, 403, 422:
			return fmt.Errorf("chat: %w", err)
		case 404:
			return fmt.Errorf("chat: the server has no local channel (set channels.local.enabled: true): %w", err)
		}
		why := "the server closed the stream"
		if err != nil {
			why = err.Error()
		}
		d := min(time.Second<<min(attempt, 4), 10*time.Second)
		out([]string{fmt.Sprintf("… %s; reconnecting in %s", text(why), d)})
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(d):
		}
		history = 50 // catch up on what the gap missed; seen ids are not shown twice
	}
	return nil
}

// text makes outside text safe for one terminal line (no escape
// sequences, no line breaks).
func text(s string) string { return strings.ReplaceAll(core.OneLine(s), "\t", " ") }

// short is how the session shows an id: the shortest prefix of its
// random part that no other card or run of the session shares
// (core/shortid). The caller holds s.mu.
func (s *Session) shortLocked(id string) string {
	ids := make([]string, 0, len(s.order)+len(s.runs)+1)
	ids = append(ids, s.order...)
	for r := range s.runs {
		ids = append(ids, r)
	}
	return shortid.Shortest(append(ids, id)...)[id]
}

// short is shortLocked for a caller that does not hold s.mu.
func (s *Session) short(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shortLocked(id)
}

// Render turns a stream message into the lines to print (none for a
// message already shown, or one this session typed).
func (s *Session) Render(m StreamMessage) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[m.ID] {
		return nil
	}
	s.seen[m.ID] = true
	if m.RunID != "" && m.Kind == "reply" {
		s.replied[m.RunID] = true
	}
	if m.RunID != "" && m.Kind == "card" {
		s.carded[m.RunID] = true
	}
	if m.Card != nil && m.ApprovalID != "" {
		if _, ok := s.cards[m.ApprovalID]; !ok {
			s.order = append(s.order, m.ApprovalID)
		}
		c := *m.Card
		s.cards[m.ApprovalID] = &c
	}
	switch {
	case m.Direction == "in":
		if s.mine[m.ID] {
			return nil
		}
		return []string{fmt.Sprintf("%s › %s", text(m.Actor), text(m.Text))}
	case m.Kind == "card" && m.Card != nil:
		return s.cardLines(m.Card)
	case m.Kind == "card_update" && m.Card != nil:
		if m.Card.Outcome == nil {
			return nil
		}
		mark := "✓"
		if m.Card.Outcome.Status != "approved" && m.Card.Outcome.Status != "edited" {
			mark = "✗"
		}
		return []string{fmt.Sprintf("%s [%s] %s", mark, s.shortLocked(m.Card.ApprovalID), text(m.Card.OutcomeLine()))}
	case m.Kind == string(core.KindReply) || m.Kind == string(core.KindQuestionUpdate) || m.Kind == string(core.KindStreamEnd):
		// Replies are Markdown: rendered, never shown as fences. A
		// question's update (who answered) and a streamed turn's end are
		// said in the thread like a reply: the terminal is a record and
		// edits nothing; a partial stream is not shown.
		var out []string
		for i, l := range renderMarkdown(m.Text, s.ansi) {
			if i == 0 {
				out = append(out, "opsgate › "+l)
			} else {
				out = append(out, "          "+l)
			}
		}
		return out
	}
	return nil
}

func (s *Session) cardLines(c *core.Card) []string {
	out := []string{fmt.Sprintf("┌ %s  [%s]", text(c.Headline()), s.shortLocked(c.ApprovalID))}
	meta := fmt.Sprintf("│ risk %s · asked by %s · decided by %s", text(string(c.Risk)), text(c.Requester), text(strings.Join(c.Approvers, ", ")))
	if c.Quorum > 1 {
		meta += fmt.Sprintf(" (%d of %d)", c.Approvals, c.Quorum)
	}
	if c.Pending() {
		meta += " · expires " + c.ExpiresAt.UTC().Format("15:04 UTC")
	}
	out = append(out, meta)
	for _, a := range c.Args {
		out = append(out, fmt.Sprintf("│   %s = %s", text(a.Name), text(a.Value)))
	}
	if c.Reason != "" {
		out = append(out, "│ reason: "+text(c.Reason))
	}
	if c.Preview != "" {
		lines := strings.Split(strings.TrimRight(c.Preview, "\n"), "\n")
		out = append(out, "│ dry run:")
		for i, l := range lines {
			if i == 6 {
				out = append(out, fmt.Sprintf("│   … %d more lines", len(lines)-6))
				break
			}
			out = append(out, "│   "+text(l))
		}
	}
	if len(c.Batch) > 1 {
		out = append(out, fmt.Sprintf("│ %d calls of one agent turn, each decided on its own:", len(c.Batch)))
		for i, bc := range c.Batch {
			line := fmt.Sprintf("│   %d. %s", i+1, text(bc.Tool))
			for _, a := range bc.Args {
				line += " " + text(a.Name) + "=" + text(a.Shown())
			}
			out = append(out, line+fmt.Sprintf(" — %s [%s]", text(string(bc.Status)), s.shortLocked(bc.ApprovalID)))
		}
		if c.BatchPending() && s.mayDecide(c) {
			out = append(out, "│ "+text(c.ApproveAllLine(c.ApprovalID)))
		}
	}
	switch {
	case !c.Pending():
		out = append(out, "└ "+text(c.OutcomeLine()))
	case s.mayDecide(c):
		out = append(out, "└ /approve · /reject <reason> · /edit key=value … (decides this card)")
	default:
		out = append(out, "└ waiting for "+text(strings.Join(c.Approvers, ", ")))
	}
	return out
}

// mayDecide is a hint for the card's last line; the server judges.
func (s *Session) mayDecide(c *core.Card) bool {
	if s.me == nil || !s.me.Has("decide") || strings.HasPrefix(s.me.Actor, "agent:") {
		return false
	}
	for _, e := range c.Eligible {
		if e == s.me.Actor {
			return true
		}
	}
	return len(c.Eligible) == 0
}

func (s *Session) shownReply(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.replied[runID]
}

func (s *Session) shownCard(runID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.carded[runID]
}

// Pending are the thread's cards that still take decisions, oldest first.
func (s *Session) Pending() []*core.Card {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*core.Card
	for _, id := range s.order {
		if c := s.cards[id]; c.Pending() {
			out = append(out, c)
		}
	}
	return out
}

// Runs are the runs this session started.
func (s *Session) Runs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.runs))
	for id := range s.runs {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

func newEventID() string {
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString()
	}
	return id.String()
}

// Send posts text as a message of the thread.
func (s *Session) Send(ctx context.Context, txt string) ([]string, error) {
	id := newEventID()
	s.mu.Lock()
	s.mine[id] = true
	s.mu.Unlock()
	var rc struct {
		RunID   string `json:"run_id"`
		Refused bool   `json:"refused"`
	}
	if err := s.c.Do(ctx, "POST", "/local/v1/messages", nil, map[string]string{"thread": s.thread, "text": txt, "event_id": id}, &rc); err != nil {
		if client.StatusOf(err) == 404 {
			return nil, fmt.Errorf("the server has no local channel (set channels.local.enabled: true): %w", err)
		}
		return nil, err
	}
	if rc.RunID != "" {
		s.mu.Lock()
		s.runs[rc.RunID] = true
		s.mu.Unlock()
		return []string{"… run " + s.short(rc.RunID) + " started"}, nil
	}
	return nil, nil
}

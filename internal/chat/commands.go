package chat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/shortid"
	"github.com/opsgate/opsgate/internal/client"
)

// HelpText lists the commands of a chat session.
const HelpText = `Type a request (deploy api 1.2.3, help) and press enter. Commands:
  /approve [ID]                 approve the thread's pending card (or the card ID)
  /reject [ID] [reason…]        reject it; the reason goes back to the requester
  /edit [ID] key=value …        approve with changed arguments (the others are kept)
  /edit [ID] {"key": "value"}   approve with these arguments, replacing them all
  /cards                        the thread's cards that still wait
  /help                         this text
  /quit                         leave (also ctrl+d, ctrl+c)
ID is the card's short id, as shown in [brackets] (or a prefix of its id).`

// Handle runs one line: a command, or a message to send. It returns the
// lines to print, ErrQuit for /quit, or an error to show (the session
// goes on).
func (s *Session) Handle(ctx context.Context, line string) ([]string, error) {
	line = strings.TrimSpace(line)
	if line == "" {
		return nil, nil
	}
	if !strings.HasPrefix(line, "/") {
		return s.Send(ctx, line)
	}
	cmd, rest, _ := strings.Cut(line[1:], " ")
	rest = strings.TrimSpace(rest)
	switch cmd {
	case "quit", "exit", "q":
		return nil, ErrQuit
	case "help", "h", "?":
		return strings.Split(HelpText, "\n"), nil
	case "cards":
		ps := s.Pending()
		if len(ps) == 0 {
			return []string{"no card waits in " + s.thread}, nil
		}
		var out []string
		for _, c := range ps {
			out = append(out, fmt.Sprintf("[%s] %s", s.short(c.ApprovalID), text(c.Headline())))
		}
		return out, nil
	case "approve", "a":
		c, _, err := s.target(ctx, rest, false)
		if err != nil {
			return nil, err
		}
		return s.decide(ctx, c, map[string]any{"action": "approve"})
	case "reject", "r":
		c, reason, err := s.target(ctx, rest, true)
		if err != nil {
			return nil, err
		}
		return s.decide(ctx, c, map[string]any{"action": "reject", "reason": reason})
	case "edit", "e":
		c, spec, err := s.target(ctx, rest, true)
		if err != nil {
			return nil, err
		}
		ap, err := s.c.Approval(ctx, c.ApprovalID)
		if err != nil {
			return nil, fmt.Errorf("read the card's arguments: %w", err)
		}
		args, err := ParseEdit(spec, ap.ProposedArgs)
		if err != nil {
			return nil, err
		}
		return s.decide(ctx, c, map[string]any{"action": "edit", "args": args})
	}
	return nil, fmt.Errorf("unknown command /%s (see /help)", text(cmd))
}

// cardWait bounds how long a decision waits for the card of a run this
// session just started (a script types /approve right after the request).
const cardWait = 30 * time.Second

// target finds the card a decision is about: the first word when it names
// a pending card (its short id as shown in [brackets], or a prefix of its
// id, 4 characters at least; core/shortid), else the newest pending card.
// rest is what follows the id, when withRest. With no card yet but a run
// of this session under way, it waits for that run's card.
func (s *Session) target(ctx context.Context, arg string, withRest bool) (*core.Card, string, error) {
	ps := s.Pending()
	for deadline := time.Now().Add(cardWait); len(ps) == 0 && s.awaitingCard(ctx) && time.Now().Before(deadline); ps = s.Pending() {
		select {
		case <-ctx.Done():
			return nil, "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	first, rest, _ := strings.Cut(arg, " ")
	if len(first) >= shortid.MinTyped && shortid.Valid(first) {
		cands := make([]shortid.Candidate, len(ps))
		for i, c := range ps {
			cands[i] = shortid.Candidate{Kind: "card", ID: c.ApprovalID, Summary: text(c.Headline())}
		}
		got, err := shortid.Resolve(first, cands)
		var ae *shortid.AmbiguousError
		switch {
		case err == nil:
			for _, c := range ps {
				if c.ApprovalID == got.ID {
					return c, strings.TrimSpace(rest), nil
				}
			}
		case errors.As(err, &ae):
			return nil, "", fmt.Errorf("card id %s", ae.Error())
		}
	}
	if !withRest && arg != "" {
		return nil, "", fmt.Errorf("no pending card in %s has an id starting with %q (see /cards)", s.thread, text(first))
	}
	if len(ps) == 0 {
		return nil, "", errors.New("no card waits in this thread (see /cards)")
	}
	return ps[len(ps)-1], arg, nil
}

// awaitingCard reports a run of this session that has shown no card yet
// and may still ask (queued or running).
func (s *Session) awaitingCard(ctx context.Context) bool {
	for _, id := range s.Runs() {
		if s.shownCard(id) {
			continue
		}
		r, err := s.c.Run(ctx, id)
		if err != nil {
			return false
		}
		if r.Status == "queued" || r.Status == "running" || (r.Status == "waiting_approval" && !s.shownCard(id)) {
			return true
		}
	}
	return false
}

func (s *Session) decide(ctx context.Context, c *core.Card, body map[string]any) ([]string, error) {
	body["thread"], body["approval_id"], body["event_id"] = s.thread, c.ApprovalID, newEventID()
	var rc struct {
		Status string `json:"status"`
	}
	err := s.c.Do(ctx, "POST", "/local/v1/decisions", nil, body, &rc)
	if err != nil {
		var e *client.Error
		if errors.As(err, &e) {
			msg := e.Message
			if e.Field != "" && !strings.Contains(msg, e.Field) {
				msg = e.Field + ": " + msg
			}
			if e.By != "" && !strings.Contains(msg, e.By) {
				msg += " (by " + e.By + ")"
			}
			return nil, fmt.Errorf("%s refused: %s (%d %s)", body["action"], text(msg), e.Status, e.Code)
		}
		return nil, err
	}
	if rc.Status == "pending" {
		return []string{fmt.Sprintf("… [%s] your %s counts; more approvals are needed", s.short(c.ApprovalID), body["action"])}, nil
	}
	return []string{fmt.Sprintf("… [%s] %s", s.short(c.ApprovalID), text(rc.Status))}, nil
}

// ParseEdit reads what follows /edit [ID]: a JSON object replacing the
// arguments whole, or key=value pairs (a value may be double-quoted,
// with \" and \\ escapes) changing those keys of proposed and keeping the
// others. Values stay text; the server reads them as the schema's types.
func ParseEdit(spec string, proposed map[string]any) (map[string]any, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New(`/edit needs key=value pairs or a JSON object, e.g. /edit version=1.2.4`)
	}
	if strings.HasPrefix(spec, "{") {
		var m map[string]any
		if err := json.Unmarshal([]byte(spec), &m); err != nil || m == nil {
			return nil, fmt.Errorf("/edit: want one JSON object: %v", err)
		}
		return m, nil
	}
	out := make(map[string]any, len(proposed))
	for k, v := range proposed {
		out[k] = v
	}
	rs := []rune(spec)
	for i := 0; i < len(rs); {
		for i < len(rs) && rs[i] == ' ' {
			i++
		}
		if i == len(rs) {
			break
		}
		start := i
		for i < len(rs) && rs[i] != '=' && rs[i] != ' ' {
			i++
		}
		key := string(rs[start:i])
		if i == len(rs) || rs[i] != '=' || key == "" {
			return nil, fmt.Errorf("/edit: %q is not key=value", text(string(rs[start:i])))
		}
		i++ // '='
		var val strings.Builder
		if i < len(rs) && rs[i] == '"' {
			i++
			closed := false
			for i < len(rs) {
				r := rs[i]
				i++
				if r == '\\' && i < len(rs) && (rs[i] == '"' || rs[i] == '\\') {
					val.WriteRune(rs[i])
					i++
					continue
				}
				if r == '"' {
					closed = true
					break
				}
				val.WriteRune(r)
			}
			if !closed {
				return nil, fmt.Errorf("/edit: the value of %s has no closing quote", text(key))
			}
			if i < len(rs) && rs[i] != ' ' {
				return nil, fmt.Errorf("/edit: a space must follow the quoted value of %s", text(key))
			}
		} else {
			for i < len(rs) && rs[i] != ' ' {
				val.WriteRune(rs[i])
				i++
			}
		}
		out[key] = val.String()
	}
	return out, nil
}

package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strings"
)

// redacted replaces the bot token wherever it would appear.
const redacted = "<telegram-token>"

// scrubber removes the bot token from text, errors and log records. The
// token is part of every Bot API URL, so any transport error (a *url.Error
// quotes the URL) would otherwise carry it into logs and the outbox's
// last_error column.
type scrubber struct{ token string }

// String returns s without the token.
func (s scrubber) String(v string) string {
	if s.token == "" || !strings.Contains(v, s.token) {
		return v
	}
	return strings.ReplaceAll(v, s.token, redacted)
}

// Err returns err with the token removed from its message and from every
// error it wraps. errors.Is still matches the original chain (so
// context.Canceled and core sentinels keep working), but errors.As only
// reaches the scrubbed copies: no caller can dig the raw URL out.
func (s scrubber) Err(err error) error {
	if err == nil || s.token == "" {
		return err
	}
	if !s.leaks(err) {
		return err
	}
	var inner []error
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			inner = append(inner, s.Err(e))
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			inner = append(inner, s.Err(e))
		}
	}
	return &scrubbedError{msg: s.String(err.Error()), orig: err, inner: inner}
}

// leaks reports whether err's message, or any error it wraps, mentions the
// token.
func (s scrubber) leaks(err error) bool {
	if strings.Contains(err.Error(), s.token) {
		return true
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e != nil && s.leaks(e) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return s.leaks(e)
		}
	}
	return false
}

type scrubbedError struct {
	msg   string
	orig  error
	inner []error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Unwrap() []error { return e.inner }

// Is matches sentinels anywhere in the original chain; comparing exposes
// nothing of the original's text.
func (e *scrubbedError) Is(target error) bool { return errors.Is(e.orig, target) }

// scrubHandler is a slog.Handler that removes the token from a record's
// message and from every attribute before the wrapped handler sees it.
type scrubHandler struct {
	next slog.Handler
	s    scrubber
}

func (h scrubHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.s.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(as))
	for i, a := range as {
		clean[i] = h.attr(a)
	}
	return scrubHandler{next: h.next.WithAttrs(clean), s: h.s}
}

func (h scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{next: h.next.WithGroup(name), s: h.s}
}

func (h scrubHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.s.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		clean := make([]any, len(g))
		for i, ga := range g {
			clean[i] = h.attr(ga)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.s.String(err.Error()))
		}
		return slog.String(a.Key, h.s.String(v.String()))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}

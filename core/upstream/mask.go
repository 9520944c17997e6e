package upstream

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
)

// maskText replaces a credential wherever this package writes text.
const maskText = "****"

// minSecret is the shortest value masked: shorter ones are no credential,
// and masking them would garble every output.
const minSecret = 4

// masker replaces a server's credentials in text.
type masker struct{ r *strings.Replacer }

func newMasker(secrets []string) *masker {
	var list []string
	for _, s := range secrets {
		if len(s) >= minSecret && !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	// Longest first, so a value containing another is masked whole.
	slices.SortFunc(list, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, s := range list {
		pairs = append(pairs, s, maskText)
	}
	return &masker{r: strings.NewReplacer(pairs...)}
}

// String masks s.
func (m *masker) String(s string) string {
	if m == nil || m.r == nil {
		return s
	}
	return m.r.Replace(s)
}

// Error masks err's text. An error holding a secret becomes one that still
// answers errors.Is for what it wraps but does not unwrap to it, so no
// caller can print the unmasked text by accident; any other is returned
// as it is.
func (m *masker) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := m.String(err.Error())
	if msg == err.Error() {
		return err // nothing to hide: keep its type for errors.As
	}
	return &maskedError{msg: msg, err: err}
}

type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }

// Is lets errors.Is see through the mask (ErrTimeout, context errors).
func (e *maskedError) Is(target error) bool { return errors.Is(e.err, target) }

// maskHandler masks the message and string attributes of every record, for
// the SDK's own logger, which sees URLs and server messages.
type maskHandler struct {
	slog.Handler
	m *masker
}

func (h maskHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.m.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h maskHandler) attr(a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.m.String(a.Value.String()))
	case slog.KindGroup:
		var as []any
		for _, g := range a.Value.Group() {
			as = append(as, h.attr(g))
		}
		return slog.Group(a.Key, as...)
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			return slog.String(a.Key, h.m.String(err.Error()))
		}
		return slog.String(a.Key, h.m.String(a.Value.String()))
	}
	return a
}

func (h maskHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = h.attr(a)
	}
	return maskHandler{Handler: h.Handler.WithAttrs(masked), m: h.m}
}

func (h maskHandler) WithGroup(name string) slog.Handler {
	return maskHandler{Handler: h.Handler.WithGroup(name), m: h.m}
}

// Package delivery is the one durable pipeline every reply and card leaves
// opsgate through: it drains the outbox per channel, renders and chunks
// replies for the platform, paces them with token buckets, retries with
// backoff, honours 429s, dead-letters what keeps failing, and records each
// chunk as it is sent so a crash resumes at the first unsent chunk.
//
// Adapters supply only what differs per platform — their limits, their
// renderer and their send call — by implementing Platform.
package delivery

import (
	"time"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// Platform is what an adapter hands the pipeline. Send receives replies
// already rendered and cut to Format().Limit, and cards to render natively
// (trimming what does not fit, with a console link).
type Platform interface {
	core.Adapter
	// Format says how replies are rendered and cut.
	Format() Format
	// Pacing returns the platform's buckets; zero Rates mean unlimited.
	Pacing() Pacing
	// Buckets names the conversation (and group, if any) a message to
	// thread draws tokens from, in the platform's own terms: Slack limits
	// per channel, Telegram per chat and per group.
	Buckets(thread core.Thread) Buckets
}

// Format is how one platform renders and counts text.
type Format struct {
	// Limit is the largest message the platform accepts, in Unit.
	Limit   int
	Unit    chunk.Unit
	Syntax  chunk.Syntax
	Markers bool
	// Render turns opsgate's Markdown subset into the native dialect.
	Render func(markdown string) string
}

// Rate is one token every Every, with bursts up to Burst.
type Rate struct {
	Every time.Duration
	Burst int
}

// Pacing lists a platform's token buckets. Conversation and Group apply per
// key from Buckets; Account applies to everything the bot account sends.
type Pacing struct {
	Conversation Rate
	Group        Rate
	Account      Rate
}

// Buckets names the keys of one message's buckets. Group is empty when the
// conversation is not a group.
type Buckets struct {
	Conversation string
	Group        string
}

// OverridePacing returns p with each non-nil rate replacing the platform's
// default, so an operator's `rate_limits` config can tighten (or loosen) a
// bucket without the adapter knowing about config. A zero Rate in an
// override removes that limit.
func OverridePacing(p Pacing, conversation, group, account *Rate) Pacing {
	if conversation != nil {
		p.Conversation = *conversation
	}
	if group != nil {
		p.Group = *group
	}
	if account != nil {
		p.Account = *account
	}
	return p
}

// paced wraps a Platform so Pacing answers the overridden rates; the rest
// of the Platform is unchanged.
type paced struct {
	Platform
	pacing Pacing
}

func (p paced) Pacing() Pacing { return p.pacing }

// WithPacing returns plat with its Pacing replaced by pacing (typically
// OverridePacing(plat.Pacing(), …)), for the composition root to apply
// config overrides to an adapter it does not otherwise change.
func WithPacing(plat Platform, pacing Pacing) Platform {
	return paced{Platform: plat, pacing: pacing}
}

// RendersQuestions forwards the wrapped platform's core.QuestionRenderer.
func (p paced) RendersQuestions() bool {
	qr, ok := p.Platform.(core.QuestionRenderer)
	return ok && qr.RendersQuestions()
}

// EditsReplies forwards the wrapped platform's core.ReplyEditor.
func (p paced) EditsReplies() bool {
	re, ok := p.Platform.(core.ReplyEditor)
	return ok && re.EditsReplies()
}

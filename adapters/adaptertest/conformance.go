package adaptertest

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/chunk"
)

// Message is one request a fake platform server received, as the adapter's
// test reads it back.
type Message struct {
	Thread core.Thread
	// ID is the message reference the fake answered (MessageRef.ID).
	ID string
	// EditOf is the ID of the message this request edited; empty for a new
	// message.
	EditOf string
	// Text is what a person would read: the text field, or the visible text
	// of a card's blocks/embed/keyboard.
	Text string
}

// Fake is the adapter's fake platform server.
type Fake interface {
	// Received returns every message accepted so far, in arrival order.
	Received() []Message
}

// Suite parametrizes RunConformance for one adapter.
type Suite struct {
	// New builds a fresh harness with the adapter under test wired to a
	// fresh fake server (called once per case). o carries what the case
	// needs (agents, tools, a policy); the adapter adds its Platform and
	// fills what o leaves unset with its own defaults.
	New func(t *testing.T, o HarnessOptions) (*Harness, Fake)
	// Thread is a thread address the adapter and its fake accept.
	Thread core.Thread
	// Requester asks for the deploy; Approver may decide it (it must be
	// among the harness's approvers; DefaultApprovers[0] if empty).
	Requester, Approver string
	// Inert returns an error when rendered — Format().Render of the hostile
	// input — contains markup the platform would act on (a live tag, a
	// mass mention, an unbalanced emphasis swallowing later text).
	Inert func(input, rendered string) error
	// BadInput posts forged (bad signature/secret) and malformed requests
	// to the adapter's inbound endpoint on a fresh harness and asserts the
	// platform gets 401/400 (or the adapter's equivalent refusal).
	// RunConformance then checks the store recorded nothing.
	BadInput func(t *testing.T, h *Harness)
	// Chat drives the adapter's inbound side as its platform would, for
	// the conversation cases (conversation.go); it returns the driver of
	// the harness h built. Nil only with Lacks[CapChat].
	Chat func(t *testing.T, h *Harness) Chat
	// Lacks declares each capability the platform does not have, with the
	// documented plain-text fallback the suite checks instead (the text
	// is logged). A capability not declared here must work natively.
	Lacks map[Capability]string
}

// Hostile are the texts every renderer must make inert: markup and mass
// mentions of each platform, which a tool's output or a requester could
// otherwise smuggle into a message.
var Hostile = []string{
	"<script>alert(1)</script>",
	"*", "**bold without end", "_", "`", "```",
	"@everyone", "@here", "<!channel>", "<!here>", "<!everyone>", "<@U012AB3CD>", "<#C123|general>",
	"<b>bold</b> & <a href=\"https://evil.example\">click</a>",
	"[click](javascript:alert(1))",
	"a < b && c > d",
}

// Case is one named rule of the suite: RunConformance runs it as a
// parallel subtest named Name, on a harness of its own.
type Case struct {
	Name string
	Run  func(t *testing.T, s Suite)
}

// Cases lists every case RunConformance runs, by table: the delivery
// rules below, the conversation rules (conversation.go). A new concern
// adds its table in a file of its own and here.
func Cases() []Case { return slices.Concat(deliveryCases, conversationCases) }

// RunConformance runs every case of Cases against the adapter s describes,
// one named subtest per rule.
func RunConformance(t *testing.T, s Suite) {
	t.Helper()
	if s.New == nil || s.Inert == nil || s.BadInput == nil || s.Thread.IsZero() || s.Requester == "" {
		t.Fatal("adaptertest: Suite needs New, Thread, Requester, Inert and BadInput")
	}
	if s.Chat == nil && s.Lacks[CapChat] == "" {
		t.Fatal("adaptertest: Suite needs Chat, or Lacks[CapChat] saying where its people answer instead")
	}
	if s.Approver == "" {
		s.Approver = DefaultApprovers[0]
	}
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Run(t, s)
		})
	}
}

// deliveryCases are the rules of the outbound side:
//
//   - FormatLimitsSane: the limit is positive and at most 1 MiB, the unit
//     is known, Render is set and keeps plain words; pacing rates are not
//     negative.
//   - RenderNeutralizesHostileText: Render of each Hostile text passes
//     Suite.Inert.
//   - LongReplyChunkedInOrder: a 12 KB reply queued in the outbox reaches
//     the fake as consecutive chunks (at least two when it exceeds the
//     limit), each within Format().Limit in
//     Format().Unit, every line exactly once and in order, one reference
//     recorded per chunk.
//   - CardRoundTrip: a deploy asked in Thread gets a card that says what
//     happens next when its rule has an escalation ladder; decided from
//     another surface (the engine, as the console would), the card is edited
//     in place or followed by a message showing the outcome, the tool runs
//     once and its result reaches the thread.
//   - BadInputChangesNothing: after Suite.BadInput the store holds no run,
//     approval, outbox message or audit entry.
var deliveryCases = []Case{
	{"FormatLimitsSane", func(t *testing.T, s Suite) {
		h, _ := s.New(t, HarnessOptions{})
		f := h.Platform.Format()
		if f.Limit <= 0 || f.Limit > 1<<20 {
			t.Errorf("Format().Limit = %d, want 1..1MiB", f.Limit)
		}
		if f.Unit != chunk.Bytes && f.Unit != chunk.UTF16 && f.Unit != chunk.Runes {
			t.Errorf("Format().Unit = %v, unknown", f.Unit)
		}
		if f.Render == nil {
			t.Fatal("Format().Render is nil")
		}
		if out := f.Render("hello world"); !strings.Contains(out, "hello world") {
			t.Errorf("Render(%q) = %q, lost the words", "hello world", out)
		}
		p := h.Platform.Pacing()
		for name, r := range map[string]struct {
			every int64
			burst int
		}{"conversation": {int64(p.Conversation.Every), p.Conversation.Burst}, "group": {int64(p.Group.Every), p.Group.Burst}, "account": {int64(p.Account.Every), p.Account.Burst}} {
			if r.every < 0 || r.burst < 0 {
				t.Errorf("Pacing().%s = %+v, negative", name, r)
			}
		}
	}},
	{"RenderNeutralizesHostileText", func(t *testing.T, s Suite) {
		h, _ := s.New(t, HarnessOptions{})
		render := h.Platform.Format().Render
		for _, in := range Hostile {
			out := render(in)
			if err := s.Inert(in, out); err != nil {
				t.Errorf("Render(%q) = %q: %v", in, out, err)
			}
		}
	}},
	{"LongReplyChunkedInOrder", func(t *testing.T, s Suite) {
		h, fake := s.New(t, HarnessOptions{})
		f := h.Platform.Format()
		text, lines := LongReply(12 << 10)
		id := h.QueueReply(s.Thread, text)
		d := h.WaitDelivered(id)
		var got []Message
		for _, m := range fake.Received() {
			if m.Thread == s.Thread {
				got = append(got, m)
			}
		}
		minParts := 1
		if chunk.Measure(f.Render(text), f.Unit) > f.Limit {
			minParts = 2
		}
		if len(got) < minParts || len(got) != d.ChunksSent || len(d.Refs) != d.ChunksSent {
			t.Fatalf("fake received %d messages; outbox recorded %d chunks, %d refs; want ≥%d and all equal",
				len(got), d.ChunksSent, len(d.Refs), minParts)
		}
		var all strings.Builder
		for i, m := range got {
			if n := chunk.Measure(m.Text, f.Unit); n > f.Limit {
				t.Errorf("chunk %d measures %d %v > limit %d", i+1, n, f.Unit, f.Limit)
			}
			if m.ID != d.Refs[i].ID {
				t.Errorf("chunk %d: fake id %q, outbox ref %q", i+1, m.ID, d.Refs[i].ID)
			}
			all.WriteString(m.Text + "\n")
		}
		if err := CheckLines(all.String(), lines); err != nil {
			t.Error(err)
		}
	}},
	{"CardRoundTrip", func(t *testing.T, s Suite) {
		h, fake := s.New(t, HarnessOptions{})
		rc := h.Send(s.Requester, s.Thread, "deploy api 1.2.3")
		if rc.RunID == "" {
			t.Fatal("deploy started no run")
		}
		ap := h.WaitApprovalPending(rc.RunID)
		var card *core.Delivery
		h.Eventually("the card to be sent", func() bool {
			for _, d := range h.Deliveries() {
				if d.Kind == core.KindCard && d.ApprovalID == ap.ID && d.Status == core.DeliverySent {
					card = d
				}
			}
			return card != nil
		})
		if len(card.Refs) == 0 {
			t.Fatal("card sent without a message reference")
		}
		if _, err := h.Decide(s.Approver, ap.ID, "approve", ""); err != nil {
			t.Fatalf("decide from another surface: %v", err)
		}
		h.WaitRun(rc.RunID, core.RunSucceeded)
		h.WaitIdle()
		if n := len(h.Dispatches()); n != 1 {
			t.Errorf("deploy dispatched %d times, want 1", n)
		}
		msgs := fake.Received()
		cardAt := -1
		for i, m := range msgs {
			if m.ID == card.Refs[0].ID && m.EditOf == "" {
				cardAt = i
			}
		}
		if cardAt < 0 {
			t.Fatalf("fake never received the card %q; got %+v", card.Refs[0].ID, msgs)
		}
		if len(ap.Ladder) > 0 && !strings.Contains(msgs[cardAt].Text, "reminded at") {
			t.Errorf("the card does not say what happens next (%q): %q", h.Engine.Card(ap).Next, msgs[cardAt].Text)
		}
		outcome, result := false, false
		for _, m := range msgs[cardAt+1:] {
			if m.Thread != s.Thread && m.EditOf == "" {
				continue
			}
			if strings.Contains(m.Text, "Approved") && (m.EditOf == card.Refs[0].ID || m.EditOf == "") {
				outcome = true
			}
			if strings.Contains(m.Text, "deployed api 1.2.3 to staging") {
				result = true
			}
		}
		if !outcome {
			t.Errorf("after the decision the card was neither edited nor followed by an outcome; got %+v", msgs[cardAt+1:])
		}
		if !result {
			t.Errorf("the tool's result never reached the thread; got %+v", msgs[cardAt+1:])
		}
	}},
	{"BadInputChangesNothing", func(t *testing.T, s Suite) {
		h, _ := s.New(t, HarnessOptions{})
		s.BadInput(t, h)
		h.StoreEmpty(t)
	}},
}

// LongReply returns about size bytes of numbered lines in short paragraphs
// ("line 0001: …"), and how many lines it holds, for checking order and
// completeness with CheckLines after any rendering and chunking.
func LongReply(size int) (string, int) {
	var b strings.Builder
	n := 0
	for b.Len() < size {
		n++
		fmt.Fprintf(&b, "line %04d: the quick brown fox jumps over the lazy dog", n)
		if n%5 == 0 {
			b.WriteString("\n\n")
		} else {
			b.WriteString("\n")
		}
	}
	return b.String(), n
}

var lineNo = regexp.MustCompile(`line (\d{4,})`)

// CheckLines reports whether text holds the numbered lines 1..n of
// LongReply each exactly once and in order.
func CheckLines(text string, n int) error {
	want := 1
	for _, m := range lineNo.FindAllStringSubmatch(text, -1) {
		got, _ := strconv.Atoi(m[1])
		if got != want {
			return fmt.Errorf("line %d where line %d was due (reordered, lost or duplicated)", got, want)
		}
		want++
	}
	if want != n+1 {
		return fmt.Errorf("received %d of %d lines", want-1, n)
	}
	return nil
}

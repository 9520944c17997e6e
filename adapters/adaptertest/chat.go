package adaptertest

import (
	"strings"
	"testing"
)

// Chat drives an adapter's inbound side the way its platform would —
// payloads shaped like the platform's real ones (replayed from the
// adapter's testdata), through its real receive path — for the
// conversation cases. Actors are identities of the channel
// ("telegram:7").
type Chat interface {
	// Say delivers text from actor as a new request addressed to the bot
	// (a mention, a command, a new mail), at the place Suite.Thread names
	// (a group, a channel, a room).
	Say(t *testing.T, actor, text string)
	// Reply delivers text from actor as a reply to to, a message the bot
	// sent (one the fake received): the platform's reply (a quote, an
	// In-Reply-To, a message in the thread).
	Reply(t *testing.T, actor string, to Message, text string)
}

// Presser is a Chat whose platform has buttons on messages (CapButtons):
// Press presses the button of on whose label contains label, as actor.
type Presser interface {
	Press(t *testing.T, actor string, on Message, label string)
}

// Submitter is a Chat whose platform opens a form from a button
// (CapForms): Submit presses the button of on whose label contains label
// and submits text in the form it opens, as actor.
type Submitter interface {
	Submit(t *testing.T, actor string, on Message, label, text string)
}

// Direct is a Chat whose platform has private chats (CapDirect): SayDirect
// delivers text from actor in a private chat with the bot, without
// replying to anything.
type Direct interface {
	SayDirect(t *testing.T, actor, text string)
}

// Capability is a platform feature the conversation cases use natively
// where the platform has it, and otherwise check the documented
// plain-text fallback of (Suite.Lacks).
type Capability string

// The capabilities.
const (
	// CapChat: people write to the bot on the channel (a Chat driver).
	// Without it: questions and approvals are answered in the console,
	// which the question and the card link to.
	CapChat Capability = "chat"
	// CapButtons: buttons on messages (Presser): a question's choices,
	// Yes/No and Skip, and a batch card's "Approve all". Without them: a
	// reply ("2", "yes", "skip") and the text command (core.ApproveAllCommand).
	CapButtons Capability = "buttons"
	// CapForms: a button that opens a form for a free answer (Submitter).
	// Without it: a reply.
	CapForms Capability = "forms"
	// CapEdit: a sent message is edited in place (an answered question's
	// message). Without it: the update arrives as a new message.
	CapEdit Capability = "edit"
	// CapDirect: private chats in which the next message continues the
	// conversation (Direct). Without them: a reply does.
	CapDirect Capability = "direct"
)

// has reports whether the suite's platform has c, logging the declared
// fallback when it has not.
func (s Suite) has(t *testing.T, c Capability) bool {
	t.Helper()
	why, lacks := s.Lacks[c]
	if lacks {
		t.Logf("adaptertest: no %s on this channel; checking the fallback: %s", c, why)
	}
	return !lacks
}

// View is what a reader sees of the messages a fake received: each
// message once, in the order it first arrived, with its latest text (an
// edit replaces the text of the message it edits).
func View(msgs []Message) []Message {
	var out []Message
	at := map[string]int{}
	for _, m := range msgs {
		if m.EditOf != "" {
			if i, ok := at[m.EditOf]; ok {
				out[i].Text = m.Text
				continue
			}
		}
		at[m.ID] = len(out)
		m.EditOf = ""
		out = append(out, m)
	}
	return out
}

// find returns the first message of msgs whose text contains every one
// of words.
func find(msgs []Message, words ...string) (Message, bool) {
	for _, m := range msgs {
		if containsAll(m.Text, words...) {
			return m, true
		}
	}
	return Message{}, false
}

func containsAll(s string, words ...string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// WaitMessage waits until the fake received a message (new, or an edit)
// whose text contains every one of words, and the outbox recorded its
// reference (as a person's reply could only come after), and returns it.
func (h *Harness) WaitMessage(fake Fake, words ...string) Message {
	h.T.Helper()
	var got Message
	h.Eventually("a message saying "+strings.Join(words, " … "), func() bool {
		m, ok := find(fake.Received(), words...)
		got = m
		return ok
	})
	h.Eventually("the outbox to record message "+got.ID, func() bool {
		for _, d := range h.Deliveries() {
			for _, r := range d.Refs {
				if r.ID == got.ID {
					return true
				}
			}
		}
		return false
	})
	return got
}

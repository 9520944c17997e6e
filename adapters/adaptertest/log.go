package adaptertest

import (
	"sync"

	"github.com/opsgate/opsgate/core"
)

// Log is the Fake of a channel whose record is its outbox (the console,
// the local channel, a webhook's thread): embedded beside the adapter in a
// wrapper whose Send calls Sent, it remembers what the adapter accepted,
// as a client reading the channel would see it.
type Log struct {
	mu   sync.Mutex
	msgs []Message
}

// Sent records m, sent as ref (an edit when m.Edit is set).
func (l *Log) Sent(m core.Outbound, ref core.MessageRef) {
	msg := Message{Thread: m.Thread, ID: ref.ID, Text: m.Text}
	if m.Edit != nil {
		msg.EditOf = m.Edit.ID
	}
	l.mu.Lock()
	l.msgs = append(l.msgs, msg)
	l.mu.Unlock()
}

// Received returns what was sent so far, in order.
func (l *Log) Received() []Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Message(nil), l.msgs...)
}

// Package console is the web console's channel. It has no platform to call:
// the outbox row itself is the console's conversation record, which the API
// and the console UI read. Sending only marks a message delivered, through
// the same durable pipeline every other channel uses, so console threads get
// the same ordering, chunk bookkeeping and card references as chat threads.
package console

import (
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

// Channel is the console's name in thread addresses and actor ids.
const Channel = core.ConsoleChannel

// Limit is the largest recorded console message.
const Limit = delivery.RecordLimit

// New returns the console's Platform: a delivery.Recorder, since the
// outbox row is the console's only record.
func New() *delivery.Recorder { return delivery.NewRecorder(Channel) }

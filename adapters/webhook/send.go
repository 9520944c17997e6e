package webhook

import (
	"github.com/opsgate/opsgate/core"
	"github.com/opsgate/opsgate/core/delivery"
)

var (
	_ delivery.Platform = (*Adapter)(nil)
	_ core.HTTPReceiver = (*Adapter)(nil)
)

// Limit is the largest webhook reply chunk: replies are read through the
// API and console, so the record-only limit applies.
const Limit = delivery.RecordLimit

// platform is the Platform half of the Adapter (see Adapter): an alias, so
// the embedded field stays unexported.
type platform = delivery.Recorder

// newPlatform returns the webhook channel's record-only Platform. A webhook
// sender gets its answer (202) at once and has nothing to reply to later,
// so, as for the console, the outbox row is the record: delivering a reply
// or card marks it sent and the reference is the outbox key. Replies, cards
// and results stay visible in GET /api/v1/deliveries and the console, and
// the thread's runs in GET /api/v1/runs?thread=webhook:<name>/<thread>.
func newPlatform() *platform { return delivery.NewRecorder(Channel) }

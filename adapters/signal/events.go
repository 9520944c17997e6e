package signal

import (
	"encoding/json"
	"errors"
	"fmt"
)

// The envelope signal-cli writes for each received message
// (JsonMessageEnvelope), as much of it as the adapter reads.
type envelope struct {
	Source       string       `json:"source"`
	SourceNumber string       `json:"sourceNumber"`
	SourceUUID   string       `json:"sourceUuid"`
	SourceName   string       `json:"sourceName"`
	SourceDevice int          `json:"sourceDevice"`
	Timestamp    int64        `json:"timestamp"`
	DataMessage  *dataMessage `json:"dataMessage,omitempty"`
	// Sync, receipt, typing, edit, story and call messages are read past.
	SyncMessage json.RawMessage `json:"syncMessage,omitempty"`
}

type dataMessage struct {
	Timestamp int64  `json:"timestamp"`
	Message   string `json:"message"`
	GroupInfo *struct {
		GroupID string `json:"groupId"`
		Type    string `json:"type"`
	} `json:"groupInfo,omitempty"`
	Quote *struct {
		ID           int64  `json:"id"`
		AuthorNumber string `json:"authorNumber"`
		AuthorUUID   string `json:"authorUuid"`
		Text         string `json:"text"`
	} `json:"quote,omitempty"`
	// Attachments are the files of the message (files.go).
	Attachments []sigAttachment `json:"attachments,omitempty"`
	Reaction    *struct {
		Emoji               string `json:"emoji"`
		TargetAuthorNumber  string `json:"targetAuthorNumber"`
		TargetAuthorUUID    string `json:"targetAuthorUuid"`
		TargetSentTimestamp int64  `json:"targetSentTimestamp"`
		IsRemove            bool   `json:"isRemove"`
	} `json:"reaction,omitempty"`
}

// receiveEvent is one /api/v1/events "receive" event's data.
type receiveEvent struct {
	Account  string    `json:"account"`
	Envelope *envelope `json:"envelope"`
}

// ErrMalformedEnvelope is an event that is not a signal-cli envelope as the
// adapter reads them.
var ErrMalformedEnvelope = errors.New("signal: malformed envelope")

// maxMessageBytes bounds a message's text (Signal caps inline text at
// 2,000 characters; longer arrives as a text attachment, which an agent
// reads like any file).
const maxMessageBytes = 8 << 10

// parseReceive decodes one event's data and checks the fields later code
// relies on: a sender (number or uuid, well formed), a timestamp.
func parseReceive(b []byte) (*receiveEvent, error) {
	var ev receiveEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEnvelope, err)
	}
	e := ev.Envelope
	if e == nil {
		return nil, fmt.Errorf("%w: no envelope", ErrMalformedEnvelope)
	}
	if e.SourceNumber != "" && !e164RE.MatchString(e.SourceNumber) {
		return nil, fmt.Errorf("%w: bad sourceNumber", ErrMalformedEnvelope)
	}
	if e.SourceUUID != "" && !uuidRE.MatchString(e.SourceUUID) {
		return nil, fmt.Errorf("%w: bad sourceUuid", ErrMalformedEnvelope)
	}
	if e.SourceNumber == "" && e.SourceUUID == "" {
		return nil, fmt.Errorf("%w: no sender", ErrMalformedEnvelope)
	}
	if e.Timestamp <= 0 {
		return nil, fmt.Errorf("%w: no timestamp", ErrMalformedEnvelope)
	}
	if d := e.DataMessage; d != nil {
		if d.GroupInfo != nil && !groupIDRE.MatchString(d.GroupInfo.GroupID) {
			return nil, fmt.Errorf("%w: bad groupId", ErrMalformedEnvelope)
		}
		if q := d.Quote; q != nil && (q.ID <= 0 || (q.AuthorNumber != "" && !e164RE.MatchString(q.AuthorNumber))) {
			return nil, fmt.Errorf("%w: bad quote", ErrMalformedEnvelope)
		}
		if r := d.Reaction; r != nil && (r.TargetSentTimestamp <= 0 || len(r.Emoji) > 32) {
			return nil, fmt.Errorf("%w: bad reaction", ErrMalformedEnvelope)
		}
		for _, at := range d.Attachments {
			if !attachmentIDRE.MatchString(at.ID) || at.Size < 0 {
				return nil, fmt.Errorf("%w: bad attachment", ErrMalformedEnvelope)
			}
		}
	}
	return &ev, nil
}

// sender is the envelope's author as an identity's user part: the number
// when signal-cli knows it, else the ACI uuid.
func (e *envelope) sender() string {
	if e.SourceNumber != "" {
		return e.SourceNumber
	}
	return e.SourceUUID
}

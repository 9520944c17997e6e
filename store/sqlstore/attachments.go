package sqlstore

import (
	"encoding/json"
	"fmt"

	"github.com/opsgate/opsgate/core"
)

// attachmentsJSON is the attachments column of events and runs: JSON, or
// "" for none (migration 0027).
func attachmentsJSON(as []core.Attachment) string {
	if len(as) == 0 {
		return ""
	}
	b, err := json.Marshal(as)
	if err != nil {
		return "" // a slice of plain structs always encodes
	}
	return string(b)
}

// parseAttachments reads the attachments column.
func parseAttachments(s string) ([]core.Attachment, error) {
	if s == "" {
		return nil, nil
	}
	var as []core.Attachment
	if err := json.Unmarshal([]byte(s), &as); err != nil {
		return nil, fmt.Errorf("attachments: %w", err)
	}
	return as, nil
}

package agenttask

import (
	"log/slog"
	"testing"
	"time"

	"github.com/opsgate/opsgate/core/gate"
)

// TestReceiptLimitDefault: a task may make MaxAgentReceipts tool calls
// unless the engine sets a limit (core/engine TestAgentTaskReceiptLimit
// drives the limit end to end with a small one).
func TestReceiptLimitDefault(t *testing.T) {
	o := Options{Store: struct{ Store }{}, Gate: &gate.Gate{}, Host: struct{ Host }{}, Owner: "r1", Now: time.Now, Logger: slog.Default()}
	tk, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if tk.o.MaxReceipts != MaxAgentReceipts || MaxAgentReceipts != 256 {
		t.Fatalf("default limit %d, want 256", tk.o.MaxReceipts)
	}
	o.MaxReceipts = 12
	if tk, _ = New(o); tk.o.MaxReceipts != 12 {
		t.Fatalf("limit %d, want 12", tk.o.MaxReceipts)
	}
}

package sqlstore

import (
	"strings"
	"testing"
)

// TestQualifiedRunColumns: the joined form names every run column, each
// prefixed, in the same order (RunGet scans them positionally).
func TestQualifiedRunColumns(t *testing.T) {
	plain := strings.Split(strings.Join(strings.Fields(runColumns), " "), ", ")
	q := strings.Split(qualifiedRunColumns, ", ")
	if len(q) != len(plain) || len(plain) != 17 {
		t.Fatalf("qualified %d columns, plain %d; want 17 each: %q", len(q), len(plain), qualifiedRunColumns)
	}
	for i := range plain {
		if q[i] != "r."+plain[i] {
			t.Errorf("column %d = %q, want %q", i, q[i], "r."+plain[i])
		}
	}
}

package history

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"

	"github.com/opsgate/opsgate/approvals"
)

func exportEntries() []approvals.AuditEntry {
	a := entry(approvals.AuditApprovalDecided, "slack:UALICE", "deploy", map[string]any{"action": "reject", "channel": "slack",
		"person": "alice", "reason": "=HYPERLINK(\"http://evil\")"})
	a.Seq, a.Hash, a.PrevHash = 7, "hmac:aa", "hmac:99"
	b := entry(approvals.AuditRunCancelled, "-bob", "", map[string]any{"previous_status": "running"})
	b.Seq = 8
	return []approvals.AuditEntry{a, b}
}

func TestExportCSV(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	x, err := NewExporter(&buf, FormatCSV)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Write(exportEntries(), deployCall); err != nil {
		t.Fatal(err)
	}
	if err := x.Flush(); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, buf.String())
	}
	if len(rows) != 3 || strings.Join(rows[0], ",") != strings.Join(ExportColumns, ",") {
		t.Fatalf("rows %q", rows)
	}
	r := rows[1]
	if r[0] != "7" || r[2] != "approval.decided" || r[3] != "slack:UALICE" || r[9] != "hmac:99" || r[10] != "hmac:aa" {
		t.Fatalf("row %q", r)
	}
	if want := `alice (slack) rejected deploy env=prod service=api version=1.2.3: =HYPERLINK("http://evil")`; r[7] != want {
		t.Fatalf("sentence %q", r[7])
	}
	// A cell a spreadsheet would read as a formula starts with an apostrophe.
	if rows[2][3] != "'-bob" {
		t.Fatalf("actor cell %q", rows[2][3])
	}
	var d map[string]any
	if err := json.Unmarshal([]byte(r[8]), &d); err != nil || d["action"] != "reject" {
		t.Fatalf("detail %q: %v", r[8], err)
	}
	// No entries: still a header.
	var empty bytes.Buffer
	x, _ = NewExporter(&empty, FormatCSV)
	if err := x.Flush(); err != nil || strings.TrimSpace(empty.String()) != strings.Join(ExportColumns, ",") {
		t.Fatalf("empty export %q %v", empty.String(), err)
	}
}

func TestExportJSONL(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	x, err := NewExporter(&buf, FormatJSONL)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Write(exportEntries(), deployCall); err != nil || x.Flush() != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	var lines []map[string]any
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 || lines[0]["seq"] != 7.0 || lines[0]["kind"] != "approval.decided" || lines[1]["actor"] != "-bob" {
		t.Fatalf("lines %v", lines)
	}
	if s, _ := lines[1]["sentence"].(string); s != "-bob cancelled the run (it was running)" {
		t.Fatalf("sentence %q", s)
	}
	if d, _ := lines[0]["detail"].(map[string]any); d["reason"] != `=HYPERLINK("http://evil")` {
		t.Fatalf("detail %v", lines[0]["detail"])
	}
}

func TestExportRefusesUnknownFormat(t *testing.T) {
	t.Parallel()
	if _, err := NewExporter(&bytes.Buffer{}, "xlsx"); err == nil {
		t.Fatal("xlsx accepted")
	}
}

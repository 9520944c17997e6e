package history

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/opsgate/opsgate/approvals"
)

// The export formats of the audit log (the console's Export links and
// `opsgate audit export --format`).
const (
	FormatCSV   = "csv"
	FormatJSONL = "jsonl"
)

// ExportColumns are the CSV header: every field of an entry, the sentence,
// and the detail as JSON.
var ExportColumns = []string{"seq", "at", "kind", "actor", "run_id", "approval_id", "tool", "sentence", "detail", "prev_hash", "hash"}

// Exporter writes audit entries as CSV (with a header row) or JSON Lines
// (one entry per line, with its "sentence"), for spreadsheets and log
// pipelines. Entries are written as given; the caller pages through the
// log in order.
type Exporter struct {
	format string
	w      io.Writer
	csv    *csv.Writer
	header bool
}

// NewExporter returns an Exporter of format (FormatCSV or FormatJSONL) to w.
func NewExporter(w io.Writer, format string) (*Exporter, error) {
	switch format {
	case FormatCSV:
		return &Exporter{format: format, w: w, csv: csv.NewWriter(w)}, nil
	case FormatJSONL:
		return &Exporter{format: format, w: w}, nil
	}
	return nil, fmt.Errorf("history: export format %q: want %s or %s", format, FormatCSV, FormatJSONL)
}

// ContentType is the MIME type of the format, for a download.
func (x *Exporter) ContentType() string {
	if x.format == FormatCSV {
		return "text/csv; charset=utf-8"
	}
	return "application/jsonl; charset=utf-8"
}

// exportLine is one JSON Lines record: the entry, and its sentence.
type exportLine struct {
	approvals.AuditEntry
	Sentence string `json:"sentence"`
}

// Write writes entries, naming their calls from calls (see Sentence).
func (x *Exporter) Write(entries []approvals.AuditEntry, calls Calls) error {
	for _, e := range entries {
		at := e.At.UTC().Format(time.RFC3339Nano)
		detail := e.Detail
		if len(detail) == 0 || !json.Valid(detail) {
			detail = nil
		}
		if x.format == FormatJSONL {
			line := exportLine{AuditEntry: e, Sentence: Sentence(e, calls)}
			line.At, line.Detail = e.At.UTC(), detail
			b, err := json.Marshal(line)
			if err != nil {
				return fmt.Errorf("history: export entry %d: %w", e.Seq, err)
			}
			if _, err := x.w.Write(append(b, '\n')); err != nil {
				return fmt.Errorf("history: export: %w", err)
			}
			continue
		}
		if !x.header {
			x.header = true
			if err := x.csv.Write(ExportColumns); err != nil {
				return fmt.Errorf("history: export: %w", err)
			}
		}
		row := []string{strconv.FormatInt(e.Seq, 10), at, string(e.Kind), e.Actor, e.RunID, e.ApprovalID, e.Tool,
			Sentence(e, calls), string(detail), e.PrevHash, e.Hash}
		for i := range row {
			row[i] = inertCell(row[i])
		}
		if err := x.csv.Write(row); err != nil {
			return fmt.Errorf("history: export: %w", err)
		}
	}
	return nil
}

// Flush writes what is buffered (the CSV header even for no entries) and
// reports any error of the writes before.
func (x *Exporter) Flush() error {
	if x.csv == nil {
		return nil
	}
	if !x.header {
		x.header = true
		if err := x.csv.Write(ExportColumns); err != nil {
			return fmt.Errorf("history: export: %w", err)
		}
	}
	x.csv.Flush()
	if err := x.csv.Error(); err != nil {
		return fmt.Errorf("history: export: %w", err)
	}
	return nil
}

// inertCell keeps a spreadsheet from reading outside text as a formula: a
// cell that starts with =, +, -, @, a tab or a carriage return gets a
// leading apostrophe (OWASP's advice on CSV injection).
func inertCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// report is what `opsgate-bench report` measured; report.json is this,
// and report.svg and report.md are drawn from it.
type report struct {
	Command        string       `json:"command"`
	Started        time.Time    `json:"started"`
	Finished       time.Time    `json:"finished"`
	Host           hostInfo     `json:"host"`
	SamplesPerCell int          `json:"samples_per_cell"`
	Stores         []string     `json:"stores"`
	Decisions      []int        `json:"decisions"`
	Pending        []int        `json:"pending"`
	Starts         []storeStart `json:"starts"`
	Cells          []cell       `json:"cells"`
}

// hostInfo is the machine the figures come from and its load: figures on
// a shared machine mean little without it.
type hostInfo struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	Go        string `json:"go"`
	LoadStart string `json:"loadavg_start"`
	LoadEnd   string `json:"loadavg_end"`
}

// storeStart is one server's setup: how long preloading its pending
// approvals took and how long until it answered /readyz.
type storeStart struct {
	Store          string  `json:"store"`
	Pending        int     `json:"pending"`
	PreloadSeconds float64 `json:"preload_seconds"`
	ReadySeconds   float64 `json:"ready_seconds"`
	Load           string  `json:"loadavg"`
	// RSSMiB is the server's resident memory after the whole matrix
	// (process_resident_memory_bytes).
	RSSMiB float64 `json:"rss_mib_after"`
}

// cell is one point of the matrix: Decisions approvals decided at once
// (each a "click": POST /api/v1/approvals/{id}/decision), Rounds times, on
// Store with Pending other approvals waiting.
type cell struct {
	Store     string `json:"store"`
	Pending   int    `json:"pending"`
	Decisions int    `json:"decisions"`
	Rounds    int    `json:"rounds"`
	Samples   int    `json:"samples"`
	// ToolStarted: decision sent → the run's tool.started event arriving
	// on its event stream; the headline figure.
	ToolStarted latency `json:"tool_started_ms"`
	// StepStarted: decision sent → the step's started_at as the server
	// recorded it (same clock: loopback only).
	StepStarted  latency `json:"step_started_ms"`
	DecisionPOST latency `json:"decision_post_ms"`
	LoadBefore   string  `json:"loadavg_before"`
	LoadAfter    string  `json:"loadavg_after"`
	Seconds      float64 `json:"seconds"`
}

// latency is a nearest-rank p50 and p99 in milliseconds.
type latency struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// writeReport writes report.json, report.svg and report.md into dir.
func writeReport(dir string, rep *report) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	svg, err := reportChart(rep).svg()
	if err != nil {
		return fmt.Errorf("report: chart: %w", err)
	}
	for name, data := range map[string][]byte{
		"report.json": append(js, '\n'),
		"report.svg":  svg,
		"report.md":   reportMarkdown(rep),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}

// storeTitle is how the report names a store.
func storeTitle(s string) string {
	switch s {
	case "sqlite":
		return "SQLite"
	case "postgres":
		return "Postgres"
	}
	return s
}

// countLabel writes 100000 as "100k", for labels.
func countLabel(n int) string {
	if n >= 1000 && n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// seriesName names the series of n decisions sent at once.
func seriesName(n int) string {
	if n == 1 {
		return "1 decision"
	}
	return fmt.Sprintf("%d decisions at once", n)
}

// reportMarkdown is report.md: the figures as a table a person can read
// and paste, with the command and the load they were taken under.
func reportMarkdown(rep *report) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# opsgate approval latency: decision → tool started\n\n")
	fmt.Fprintf(&b, "`%s`, %s → %s (%s UTC).\n\n", rep.Command, rep.Started.Format("15:04:05"), rep.Finished.Format("15:04:05"), rep.Started.Format("2006-01-02"))
	fmt.Fprintf(&b, "%s/%s, %d CPUs, %s; load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		rep.Host.OS, rep.Host.Arch, rep.Host.CPUs, rep.Host.Go, rep.Host.LoadStart, rep.Host.LoadEnd)
	fmt.Fprintf(&b, "Each cell sends N approvals' decisions at once (`POST /api/v1/approvals/{id}/decision`, one "+
		"\"click\" each) and times each from sending it to its run's `tool.started` event on the run's event stream; "+
		"rounds repeat until at least %d decisions are timed. \"step started\" is the step's `started_at` as the server "+
		"recorded it. The pending approvals were written into the store before the server started "+
		"(`opsgate-bench preload`) and stay pending throughout. One server per store and backlog, all running side by side, "+
		"their rounds interleaved (A, B, C, A, B, C…): on a shared machine read the ratios below rather than the absolute figures.\n\n", rep.SamplesPerCell)
	fmt.Fprintf(&b, "![decision → tool started, p50 and p99](report.svg)\n\n")
	fmt.Fprintf(&b, "| store | pending approvals | decisions at once | samples | tool.started p50 | p99 | step started p50 | p99 | load average before → after |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, c := range rep.Cells {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %s → %s |\n",
			storeTitle(c.Store), countLabel(c.Pending), c.Decisions, c.Samples, c.ToolStarted.P50, c.ToolStarted.P99,
			c.StepStarted.P50, c.StepStarted.P99, c.LoadBefore, c.LoadAfter)
	}
	b.Write(ratioTables(rep))
	fmt.Fprintf(&b, "\n| store | pending approvals | preload | migrate + preload + start until ready | load average | server RSS after the matrix |\n|---|---:|---:|---:|---|---:|\n")
	for _, s := range rep.Starts {
		fmt.Fprintf(&b, "| %s | %s | %.1f s | %.1f s | %s | %.1f MiB |\n", storeTitle(s.Store), countLabel(s.Pending), s.PreloadSeconds,
			s.ReadySeconds, s.Load, s.RSSMiB)
	}
	return b.Bytes()
}

// ratioTables compares cells measured side by side: each backlog against
// the first (same store, same decisions), and Postgres against SQLite.
func ratioTables(rep *report) []byte {
	find := func(store string, pending, n int) *cell {
		for i, c := range rep.Cells {
			if c.Store == store && c.Pending == pending && c.Decisions == n {
				return &rep.Cells[i]
			}
		}
		return nil
	}
	ratio := func(a, b float64) string {
		if b <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", a/b)
	}
	var b bytes.Buffer
	if len(rep.Pending) > 1 {
		base := rep.Pending[0]
		fmt.Fprintf(&b, "\ntool.started with a backlog ÷ the same store with %s pending, same decisions at once:\n\n", countLabel(base))
		fmt.Fprintf(&b, "| store | pending approvals | decisions at once | p50 | p99 |\n|---|---:|---:|---:|---:|\n")
		for _, st := range rep.Stores {
			for _, p := range rep.Pending[1:] {
				for _, n := range rep.Decisions {
					c, c0 := find(st, p, n), find(st, base, n)
					if c == nil || c0 == nil {
						continue
					}
					fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", storeTitle(st), countLabel(p), n,
						ratio(c.ToolStarted.P50, c0.ToolStarted.P50), ratio(c.ToolStarted.P99, c0.ToolStarted.P99))
				}
			}
		}
	}
	if len(rep.Stores) == 2 {
		a, z := rep.Stores[1], rep.Stores[0]
		fmt.Fprintf(&b, "\ntool.started on %s ÷ on %s, same backlog, same decisions at once:\n\n", storeTitle(a), storeTitle(z))
		fmt.Fprintf(&b, "| pending approvals | decisions at once | p50 | p99 |\n|---:|---:|---:|---:|\n")
		for _, p := range rep.Pending {
			for _, n := range rep.Decisions {
				c, c0 := find(a, p, n), find(z, p, n)
				if c == nil || c0 == nil {
					continue
				}
				fmt.Fprintf(&b, "| %s | %d | %s | %s |\n", countLabel(p), n,
					ratio(c.ToolStarted.P50, c0.ToolStarted.P50), ratio(c.ToolStarted.P99, c0.ToolStarted.P99))
			}
		}
	}
	return b.Bytes()
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/opsgate/opsgate/store/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m)
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
}

// server is the opsgate binary, built once per test run by opsgateBinary.
var server struct {
	once     sync.Once
	dir, bin string
	err      error
}

func opsgateBinary(t *testing.T) string {
	t.Helper()
	server.once.Do(func() {
		if server.dir, server.err = os.MkdirTemp("", "opsgate-bench-test-"); server.err != nil {
			return
		}
		server.bin = filepath.Join(server.dir, "opsgate")
		out, err := exec.Command("go", "build", "-o", server.bin, "github.com/opsgate/opsgate/cmd/opsgate").CombinedOutput()
		if err != nil {
			server.err = fmt.Errorf("go build opsgate: %v\n%s", err, out)
		}
	})
	if server.err != nil {
		t.Fatal(server.err)
	}
	return server.bin
}

// TestReportMatrix runs a tiny matrix against the real server binary on
// both stores and checks the report's shape: every cell in report.json,
// report.md and report.svg, percentiles in order, every series named.
// It asserts no timing value.
func TestReportMatrix(t *testing.T) {
	t.Parallel()
	bin := opsgateBinary(t)
	out := filepath.Join(t.TempDir(), "report")
	args := []string{"report", "--out", out, "--opsgate", bin, "--stores", "sqlite,postgres", "--postgres", pgtest.DSN(t),
		"--decisions", "1,3", "--pending", "0,20", "--samples", "3", "--min-rounds", "2", "--timeout", "10m"}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("report: %v\n%s%s", err, stdout.String(), stderr.String())
	}

	var rep report
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !strings.Contains(rep.Command, "--decisions 1,3") || rep.Host.CPUs < 1 || rep.SamplesPerCell != 3 {
		t.Errorf("report header = %q, %+v, samples %d", rep.Command, rep.Host, rep.SamplesPerCell)
	}
	if len(rep.Starts) != 4 {
		t.Errorf("%d server starts recorded, want 4 (2 stores × 2 backlogs)", len(rep.Starts))
	}
	for _, st := range rep.Starts {
		if st.RSSMiB <= 0 {
			t.Errorf("%s, %d pending: no server RSS recorded", st.Store, st.Pending)
		}
	}
	seen := map[string]bool{}
	for _, c := range rep.Cells {
		key := fmt.Sprintf("%s/%d/%d", c.Store, c.Pending, c.Decisions)
		if seen[key] {
			t.Errorf("cell %s twice", key)
		}
		seen[key] = true
		if c.Samples != c.Rounds*c.Decisions || c.Samples < 3 || c.Rounds < 2 {
			t.Errorf("cell %s: %d samples from %d rounds of %d", key, c.Samples, c.Rounds, c.Decisions)
		}
		for name, l := range map[string]latency{"tool.started": c.ToolStarted, "step started": c.StepStarted, "POST": c.DecisionPOST} {
			if l.P50 <= 0 || l.P50 > l.P99 {
				t.Errorf("cell %s %s: p50 %v, p99 %v", key, name, l.P50, l.P99)
			}
		}
	}
	for _, st := range []string{"sqlite", "postgres"} {
		for _, p := range []int{0, 20} {
			for _, n := range []int{1, 3} {
				if key := fmt.Sprintf("%s/%d/%d", st, p, n); !seen[key] {
					t.Errorf("cell %s missing from report.json", key)
				}
			}
		}
	}
	if len(rep.Cells) != 8 {
		t.Errorf("%d cells, want 8", len(rep.Cells))
	}

	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := regexp.MustCompile(`(?m)^\| (SQLite|Postgres) \| (0|20) \| (1 \| 3|3 \| 6) \| [0-9.]+ ms \|`).FindAll(md, -1)
	if len(rows) != 8 {
		t.Errorf("report.md has %d cell rows, want 8:\n%s", len(rows), md)
	}

	svg, err := os.ReadFile(filepath.Join(out, "report.svg"))
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	for _, n := range []int{1, 3} {
		if !doc.series[seriesName(n)] || !doc.legend[seriesName(n)] {
			t.Errorf("report.svg does not name series %q (series %v, legend %v)", seriesName(n), doc.series, doc.legend)
		}
	}
	if doc.bars != 8 {
		t.Errorf("report.svg has %d bars, want 8", doc.bars)
	}
	for _, label := range []string{"SQLite", "Postgres", "0 pending", "20 pending"} {
		if !strings.Contains(doc.groups, label) {
			t.Errorf("report.svg's groups %q lack %q", doc.groups, label)
		}
	}
}

// svgDoc is what the tests read back from a chart.
type svgDoc struct {
	series, legend map[string]bool
	bars           int
	groups         string
	// rectHeights of each bar: the pale (p99) one, then the solid (p50).
	rectHeights [][2]float64
}

// parseSVG reads the chart as XML (failing the test if it is not) and
// collects its series, legend entries, bars and group labels.
func parseSVG(t *testing.T, data []byte) svgDoc {
	t.Helper()
	doc := svgDoc{series: map[string]bool{}, legend: map[string]bool{}}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var inGroup, inBar bool
	var rects []float64
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v\n%s", err, data)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = el.Name.Local
			}
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "g" && attr["class"] == "series":
				doc.series[attr["data-series"]] = true
			case el.Name.Local == "g" && attr["class"] == "legend":
				doc.legend[attr["data-series"]] = true
			case el.Name.Local == "g" && attr["class"] == "bar":
				doc.bars++
				inBar, rects = true, nil
			case el.Name.Local == "rect" && inBar:
				var h float64
				fmt.Sscan(attr["height"], &h)
				rects = append(rects, h)
				if len(rects) == 2 {
					doc.rectHeights = append(doc.rectHeights, [2]float64{rects[0], rects[1]})
				}
			case el.Name.Local == "text" && attr["class"] == "group":
				inGroup = true
			}
		case xml.CharData:
			if inGroup {
				doc.groups += string(el) + "|"
			}
		case xml.EndElement:
			inGroup = false
			if el.Name.Local == "g" {
				inBar = false
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	return doc
}

func TestBarChartSVG(t *testing.T) {
	t.Parallel()
	c := &barChart{
		title: `p99 <"tail"> & co`, subtitle: "load 1.0", yLabel: "ms",
		groups: []string{"SQLite\n0 pending", "Postgres\n100k pending"},
		series: []string{"1 decision", "10 decisions at once", "100 decisions at once"},
		bars: map[[2]int]chartBar{
			{0, 0}: {lo: 1.5, hi: 3}, {0, 1}: {lo: 10, hi: 40}, {0, 2}: {lo: 45, hi: 294},
			{1, 0}: {lo: 0, hi: 0.5}, {1, 1}: {lo: 7, hi: 7}, {1, 2}: {lo: 100, hi: 2500, tip: "<tip & more>"},
		},
	}
	svg, err := c.svg()
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, svg)
	if len(doc.series) != 3 || len(doc.legend) != 3 || doc.bars != 6 {
		t.Errorf("series %v, legend %v, bars %d; want 3, 3, 6", doc.series, doc.legend, doc.bars)
	}
	for name := range doc.series {
		if !doc.legend[name] {
			t.Errorf("series %q has no legend entry", name)
		}
	}
	if len(doc.rectHeights) != 6 {
		t.Fatalf("%d bars with two rects, want 6", len(doc.rectHeights))
	}
	for i, h := range doc.rectHeights {
		if h[0] < h[1] || h[1] < 0 {
			t.Errorf("bar %d: p99 bar %v shorter than p50 bar %v", i, h[0], h[1])
		}
	}
	// A bar of 2.5 s reaches above one of 3 ms: the axis is shared.
	if doc.rectHeights[5][0] <= doc.rectHeights[0][0] {
		t.Errorf("2.5 s bar (%v) not taller than 3 ms bar (%v)", doc.rectHeights[5][0], doc.rectHeights[0][0])
	}
	if !bytes.Contains(svg, []byte("p99 &lt;&#34;tail&#34;&gt; &amp; co")) {
		t.Errorf("title not escaped:\n%s", svg)
	}
	if !strings.Contains(doc.groups, "100k pending") || !strings.Contains(doc.groups, "SQLite") {
		t.Errorf("group labels %q", doc.groups)
	}
}

func TestBarChartRefusesWhatItCannotDraw(t *testing.T) {
	t.Parallel()
	if _, err := (&barChart{groups: []string{"a"}, series: []string{"s"}}).svg(); err == nil {
		t.Error("a chart without bars drew")
	}
	nan := &barChart{groups: []string{"a"}, series: []string{"s"}, bars: map[[2]int]chartBar{{0, 0}: {lo: 1, hi: math.NaN()}}}
	if _, err := nan.svg(); err == nil {
		t.Error("a NaN bar drew")
	}
}

func TestParseReportFlags(t *testing.T) {
	t.Parallel()
	o, err := parseReportFlags([]string{"--out", "x", "--stores", "sqlite"}, discard{})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(o.decisions, o.pending, o.samples, o.stores) != "[1 10 100] [0 10000 100000] 100 [sqlite]" {
		t.Errorf("defaults: %v %v %v %v", o.decisions, o.pending, o.samples, o.stores)
	}
	o, err = parseReportFlags([]string{"--out", "x", "--postgres", "postgres://bench:s3cret@127.0.0.1:5432/postgres"}, discard{})
	if err != nil || len(o.stores) != 2 {
		t.Errorf("both stores with a loopback Postgres: %v, %v", o.stores, err)
	}
	if strings.Contains(o.command, "s3cret") || !strings.Contains(o.command, "--postgres postgres://bench:") {
		t.Errorf("the command the report records is %q: want it without the password", o.command)
	}
	for _, bad := range [][]string{
		{"--stores", "sqlite"}, // no --out
		{"--out", "x"},         // postgres without --postgres
		{"--out", "x", "--postgres", "postgres://postgres@10.0.0.1:5432/postgres"},
		{"--out", "x", "--postgres", "host=127.0.0.1 user=postgres"},
		{"--out", "x", "--stores", "sqlite,mysql"},
		{"--out", "x", "--stores", "sqlite,sqlite"},
		{"--out", "x", "--stores", "sqlite", "--decisions", "0"},
		{"--out", "x", "--stores", "sqlite", "--decisions", "1001"},
		{"--out", "x", "--stores", "sqlite", "--decisions", "1,1"},
		{"--out", "x", "--stores", "sqlite", "--decisions", "1,,2"},
		{"--out", "x", "--stores", "sqlite", "--pending", "-1"},
		{"--out", "x", "--stores", "sqlite", "--pending", "2000000"},
		{"--out", "x", "--stores", "sqlite", "--samples", "0"},
		{"--out", "x", "--stores", "sqlite", "--samples", "10001"},
		{"--out", "x", "--stores", "sqlite", "--min-rounds", "0"},
		{"--out", "x", "--stores", "sqlite", "extra"},
	} {
		if _, err := parseReportFlags(bad, discard{}); err == nil {
			t.Errorf("parseReportFlags(%q) accepted", bad)
		}
	}
}

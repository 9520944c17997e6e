package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"math"
	"strings"
)

// barChart is a grouped bar chart on a logarithmic axis, written as SVG:
// per group one bar per series, each a pale bar to its high value (p99)
// with a solid bar to its low value (p50) over it. It is hand-written
// because the report needs only this, and the maintained Go charting
// libraries (gonum/plot, go-analyze/charts) bring fonts, rasterizers and
// several modules with them (README, Performance).
type barChart struct {
	title, subtitle, yLabel string
	groups                  []string // x-axis groups; "\n" splits a label into lines
	series                  []string
	bars                    map[[2]int]chartBar // by [group, series]
}

// chartBar is one bar: lo ≤ hi, both > 0, and its tooltip.
type chartBar struct {
	lo, hi float64
	tip    string
}

// palette colours the series, in order (then again).
var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"}

// The chart's geometry, in pixels.
const (
	chartBarW   = 22.0
	chartGap    = 28.0
	chartLeft   = 70.0
	chartRight  = 20.0
	chartTop    = 96.0
	chartPlotH  = 300.0
	chartBottom = 56.0
	chartMinW   = 640.0
	// chartFloor is the smallest value the log axis shows (ms): a zero
	// would have no place on it.
	chartFloor = 0.01
)

// svg renders the chart. It refuses a chart with no bars or a bar whose
// values are not finite.
func (c *barChart) svg() ([]byte, error) {
	if len(c.bars) == 0 || len(c.series) == 0 || len(c.groups) == 0 {
		return nil, errors.New("nothing to draw")
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for k, b := range c.bars {
		if math.IsNaN(b.lo) || math.IsNaN(b.hi) || math.IsInf(b.lo, 0) || math.IsInf(b.hi, 0) {
			return nil, fmt.Errorf("bar %v: values %v, %v are not finite", k, b.lo, b.hi)
		}
		lo, hi = math.Min(lo, math.Max(b.lo, chartFloor)), math.Max(hi, math.Max(b.hi, chartFloor))
	}
	// Half the smallest value still clears the axis, so the lowest bar
	// keeps some height.
	e0, e1 := math.Floor(math.Log10(lo/2)), math.Ceil(math.Log10(hi))
	if e1 <= e0 {
		e1 = e0 + 1
	}
	groupW := float64(len(c.series))*chartBarW + chartGap
	width := math.Max(chartMinW, chartLeft+float64(len(c.groups))*groupW+chartRight)
	height := chartTop + chartPlotH + chartBottom
	bottom := chartTop + chartPlotH
	y := func(v float64) float64 {
		v = math.Max(v, chartFloor)
		return bottom - (math.Log10(v)-e0)/(e1-e0)*chartPlotH
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.title))
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="#ffffff"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", chartLeft, esc(c.title))
	fmt.Fprintf(&b, `<text x="%.0f" y="40" fill="#555555">%s</text>`+"\n", chartLeft, esc(c.subtitle))

	// Legend: one swatch per series, then how to read a bar.
	x := chartLeft
	for s, name := range c.series {
		fmt.Fprintf(&b, `<g class="legend" data-series="%s"><rect x="%.0f" y="54" width="12" height="12" fill="%s"/><text x="%.0f" y="65">%s</text></g>`+"\n",
			esc(name), x, palette[s%len(palette)], x+16, esc(name))
		x += 16 + 7*float64(len(name)) + 18
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="84" fill="#555555">solid: p50 · pale: p99 (the figure above each bar)</text>`+"\n", chartLeft)

	// The axis: gridlines at 1, 2 and 5 of each decade.
	fmt.Fprintf(&b, `<text transform="translate(16 %.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", chartTop+chartPlotH/2, esc(c.yLabel))
	for e := e0; e <= e1; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if v > math.Pow(10, e1)*1.0001 {
				break
			}
			stroke := "#eeeeee"
			if m == 1 {
				stroke = "#cccccc"
			}
			fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="%s"/>`+"\n", chartLeft, width-chartRight, y(v), y(v), stroke)
			fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" text-anchor="end" fill="#555555">%s</text>`+"\n", chartLeft-6, y(v)+4, tickLabel(v))
		}
	}
	fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="#333333"/>`+"\n", chartLeft, width-chartRight, bottom, bottom)

	for s, name := range c.series {
		colour := palette[s%len(palette)]
		fmt.Fprintf(&b, `<g class="series" data-series="%s" fill="%s">`+"\n", esc(name), colour)
		for g := range c.groups {
			bar, ok := c.bars[[2]int{g, s}]
			if !ok {
				continue
			}
			bx := chartLeft + chartGap/2 + float64(g)*groupW + float64(s)*chartBarW
			yhi, ylo := y(bar.hi), y(bar.lo)
			fmt.Fprintf(&b, `<g class="bar"><title>%s</title>`, esc(bar.tip))
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f" fill-opacity="0.35"/>`, bx, yhi, chartBarW-2, bottom-yhi)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.0f" height="%.1f"/>`, bx, ylo, chartBarW-2, bottom-ylo)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9" fill="#333333">%s</text></g>`+"\n",
				bx+(chartBarW-2)/2, yhi-3, valueLabel(bar.hi))
		}
		b.WriteString("</g>\n")
	}
	for g, label := range c.groups {
		cx := chartLeft + chartGap/2 + float64(g)*groupW + float64(len(c.series))*chartBarW/2
		for i, line := range strings.Split(label, "\n") {
			fmt.Fprintf(&b, `<text class="group" x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", cx, bottom+18+15*float64(i), esc(line))
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes(), nil
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // writes to a strings.Builder: no error
	return b.String()
}

// tickLabel writes an axis value: 0.5 ms, 20 ms, 1 s.
func tickLabel(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%g s", v/1000)
	}
	return fmt.Sprintf("%g ms", v)
}

// valueLabel writes a bar's figure with two significant digits or more.
func valueLabel(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

// reportChart draws the report: a group per store and backlog, a series
// per number of decisions sent at once, bars from decision to tool.started.
func reportChart(rep *report) *barChart {
	c := &barChart{
		title: "opsgate: approval decision → tool started",
		subtitle: fmt.Sprintf("%d CPUs, load average %s → %s; %s", rep.Host.CPUs, rep.Host.LoadStart, rep.Host.LoadEnd,
			rep.Started.Format("2006-01-02 15:04 UTC")),
		yLabel: "decision sent → tool.started (log scale)",
		bars:   map[[2]int]chartBar{},
	}
	group := map[[2]any]int{}
	for _, st := range rep.Stores {
		for _, p := range rep.Pending {
			group[[2]any{st, p}] = len(c.groups)
			c.groups = append(c.groups, fmt.Sprintf("%s\n%s pending", storeTitle(st), countLabel(p)))
		}
	}
	series := map[int]int{}
	for _, n := range rep.Decisions {
		series[n] = len(c.series)
		c.series = append(c.series, seriesName(n))
	}
	for _, cl := range rep.Cells {
		g, okG := group[[2]any{cl.Store, cl.Pending}]
		s, okS := series[cl.Decisions]
		if !okG || !okS {
			continue
		}
		c.bars[[2]int{g, s}] = chartBar{lo: cl.ToolStarted.P50, hi: cl.ToolStarted.P99,
			tip: fmt.Sprintf("%s, %s pending, %s: p50 %.1f ms, p99 %.1f ms (%d samples; load %s)", storeTitle(cl.Store),
				countLabel(cl.Pending), seriesName(cl.Decisions), cl.ToolStarted.P50, cl.ToolStarted.P99, cl.Samples, cl.LoadAfter)}
	}
	return c
}

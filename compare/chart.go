package main

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Line charts of the run's own figures, written as plain SVG: one
// polyline per library, axes with ticks and labels, a legend.

type point struct{ x, y float64 }

type series struct {
	name string
	pts  []point // in x order
}

type chart struct {
	title, xLabel, yLabel string
	logX                  bool // x positions by log(x): goroutine counts 1 to 256
	// logY: y by log10(y), for rates that span decades (the pipelined
	// floor beside unbatched locks); values at or below zero sit on the
	// axis.
	logY   bool
	series []series
}

// The chart's geometry in SVG user units: the plot area and, right of it,
// the legend.
const (
	chartW, chartH = 760, 440
	plotL, plotT   = 70, 40
	plotR, plotB   = 540, 380
	legendX        = 560
)

// palette: distinct colours that read on white.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
	"#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000", "#aec7e8"}

// xTicks are the distinct x values of all series, in order.
func (c *chart) xTicks() []float64 {
	var xs []float64
	for _, s := range c.series {
		for _, p := range s.pts {
			xs = append(xs, p.x)
		}
	}
	slices.Sort(xs)
	return slices.Compact(xs)
}

// yAxis returns the y axis's bottom and top, round numbers around every y,
// and its ticks.
func (c *chart) yAxis() (lo, hi float64, ticks []float64) {
	top, bottom := 0.0, math.Inf(1)
	for _, s := range c.series {
		for _, p := range s.pts {
			top = max(top, p.y)
			if p.y > 0 {
				bottom = min(bottom, p.y)
			}
		}
	}
	if c.logY && top > 0 {
		lo, hi = math.Pow(10, math.Floor(math.Log10(bottom))), math.Pow(10, math.Ceil(math.Log10(top)))
		if hi == lo {
			hi *= 10
		}
		for d := lo; d < hi*1.01; d *= 10 {
			for _, m := range []float64{1, 2, 5} {
				if v := d * m; v <= hi*1.01 {
					ticks = append(ticks, v)
				}
			}
		}
		return lo, hi, ticks
	}
	if top <= 0 {
		top = 1
	}
	step := niceStep(top / 5)
	hi = math.Ceil(top/step) * step
	for i := 0.0; i*step <= hi+step/2; i++ {
		ticks = append(ticks, i*step)
	}
	return 0, hi, ticks
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// scale maps data to SVG coordinates within the plot area.
type scale struct {
	xs         []float64
	logX, logY bool
	yLo, yHi   float64
	xLo, xSpan float64
}

func (c *chart) scale() scale {
	s := scale{xs: c.xTicks(), logX: c.logX, logY: c.logY}
	s.yLo, s.yHi, _ = c.yAxis()
	if len(s.xs) > 0 {
		lo, hi := s.xv(s.xs[0]), s.xv(s.xs[len(s.xs)-1])
		s.xLo, s.xSpan = lo, hi-lo
	}
	return s
}

func (s scale) xv(x float64) float64 {
	if s.logX {
		return math.Log2(max(x, 1e-9))
	}
	return x
}

// A chart of one x value draws it in the middle.
func (s scale) px(x float64) float64 {
	if s.xSpan == 0 {
		return (plotL + plotR) / 2
	}
	return plotL + (s.xv(x)-s.xLo)/s.xSpan*(plotR-plotL)
}

func (s scale) py(y float64) float64 {
	if s.logY {
		if y <= s.yLo {
			return plotB
		}
		return plotB - math.Log10(y/s.yLo)/math.Log10(s.yHi/s.yLo)*(plotB-plotT)
	}
	return plotB - (y-s.yLo)/(s.yHi-s.yLo)*(plotB-plotT)
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (c *chart) writeSVG(w io.Writer) error {
	bw := bufio.NewWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(bw, format, args...) }
	sc := c.scale()
	_, _, yTicks := c.yAxis()
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	p(`<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	p(`<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", plotL, esc(c.title))
	// Grid and y ticks.
	for _, y := range yTicks {
		py := sc.py(y)
		p(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", plotL, py, plotR, py)
		p(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", plotL-6, py+4, esc(tickLabel(y)))
	}
	for _, x := range sc.xs {
		px := sc.px(x)
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", px, plotT, px, plotB)
		p(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", px, plotB+18, esc(tickLabel(x)))
	}
	p(`<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", plotL, plotT, plotR-plotL, plotB-plotT)
	p(`<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", (plotL+plotR)/2, plotB+42, esc(c.xLabel))
	p(`<text transform="translate(18 %d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (plotT+plotB)/2, esc(c.yLabel))
	for i, s := range c.series {
		colour, dash, width := palette[i%len(palette)], lineStyle(s.name), 2
		if strings.HasPrefix(s.name, "redlock") {
			width = 3
		}
		pts := make([]string, len(s.pts))
		for j, pt := range s.pts {
			pts[j] = fmt.Sprintf("%.1f,%.1f", sc.px(pt.x), sc.py(pt.y))
		}
		p(`<g class="series" data-name="%s">`+"\n", esc(s.name))
		p(`<title>%s</title>`+"\n", esc(s.name))
		p(`<polyline fill="none" stroke="%s" stroke-width="%d"%s points="%s"/>`+"\n", colour, width, dash, strings.Join(pts, " "))
		for _, pt := range s.pts {
			p(`<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s: %s, %s</title></circle>`+"\n",
				sc.px(pt.x), sc.py(pt.y), colour, esc(s.name), num(pt.x), num(math.Round(pt.y)))
		}
		p("</g>\n")
		ly := plotT + 8 + 18*i
		p(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="%d"%s/>`+"\n", legendX, ly, legendX+24, ly, colour, width, dash)
		p(`<text x="%d" y="%d">%s</text>`+"\n", legendX+30, ly+4, esc(s.name))
	}
	p("</svg>\n")
	return bw.Flush()
}

// lineStyle dashes the floors and ceilings and dots the minimal locks, so
// that the libraries' lines stand out.
func lineStyle(name string) string {
	switch {
	case strings.HasPrefix(name, "floor-"), strings.HasPrefix(name, "ceiling-"):
		return ` stroke-dasharray="8 4"`
	case strings.HasPrefix(name, "min-"):
		return ` stroke-dasharray="2 3"`
	}
	return ""
}

// tickLabel writes 1500 as 1500, 25000 as 25k and 0.5 as 0.5.
func tickLabel(v float64) string {
	if v >= 10000 && math.Mod(v, 1000) == 0 {
		return num(v/1000) + "k"
	}
	return num(v)
}

// chartFile is one chart and the file it goes to.
type chartFile struct {
	name string
	c    *chart
}

// charts are the run's charts: uncontended p50 against N, and many keys'
// locks/s against goroutines for each N; only those with figures.
func charts(results []*result) []chartFile {
	var out []chartFile
	if c := uncontendedChart(results); c != nil {
		out = append(out, chartFile{"uncontended-p50.svg", c})
	}
	var ns []int
	for _, r := range ofKind(results, manyKeys) {
		ns = append(ns, r.sc.nodes)
	}
	slices.Sort(ns)
	for _, n := range slices.Compact(ns) {
		if c := manyKeysChart(results, n); c != nil {
			out = append(out, chartFile{fmt.Sprintf("manykeys-n%d.svg", n), c})
		}
	}
	return out
}

// lines gathers one point per scenario and library into series, in the
// order the libraries first appear.
func lines(rows []*result, xy func(r *result, s *sample) (point, bool)) []series {
	var out []series
	for _, r := range rows {
		for _, s := range r.samples {
			pt, ok := xy(r, s)
			if !ok {
				continue
			}
			i := slices.IndexFunc(out, func(l series) bool { return l.name == s.lib })
			if i < 0 {
				out = append(out, series{name: s.lib})
				i = len(out) - 1
			}
			out[i].pts = append(out[i].pts, pt)
		}
	}
	for i := range out {
		slices.SortFunc(out[i].pts, func(a, b point) int { return cmp.Compare(a.x, b.x) })
	}
	return out
}

func uncontendedChart(results []*result) *chart {
	var rows []*result
	for _, r := range ofKind(results, uncontended) {
		if r.sc.slow == 0 {
			rows = append(rows, r)
		}
	}
	ls := lines(rows, func(r *result, s *sample) (point, bool) {
		st, ok := statsOf(s)
		return point{float64(r.sc.nodes), float64(st.p50) / 1e3}, ok
	})
	if len(ls) == 0 {
		return nil
	}
	return &chart{title: "Uncontended Acquire+Release, p50", xLabel: "nodes (N)", yLabel: "p50 latency (µs)", series: ls}
}

func manyKeysChart(results []*result, n int) *chart {
	var rows []*result
	for _, r := range ofKind(results, manyKeys) {
		if r.sc.nodes == n {
			rows = append(rows, r)
		}
	}
	ls := lines(rows, func(r *result, s *sample) (point, bool) {
		st, ok := statsOf(s)
		return point{float64(r.sc.goroutines), st.rate}, ok && st.rate > 0
	})
	if len(ls) == 0 {
		return nil
	}
	return &chart{title: fmt.Sprintf("Many keys, N = %d: a key per goroutine", n), xLabel: "goroutines",
		yLabel: "locks/s (log scale)", logX: true, logY: true, series: ls}
}

// writeCharts writes the run's charts into dir and returns their paths.
func writeCharts(dir string, results []*result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, cf := range charts(results) {
		path := filepath.Join(dir, cf.name)
		f, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = cf.c.writeSVG(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("%s: %w", path, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

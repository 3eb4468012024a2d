package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// svgShape is what the tests read back from a chart: its polylines with
// the series each belongs to, its circles, and whether the root is an svg
// element.
type svgShape struct {
	root      string
	polylines map[string][]point // by series name
	circles   []point
	texts     []string
}

// parseSVG decodes the whole document with encoding/xml, which fails on
// anything that is not well-formed.
func parseSVG(t *testing.T, b []byte) svgShape {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	sh := svgShape{polylines: map[string][]point{}}
	series := ""
	inText := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if sh.root == "" {
				sh.root = el.Name.Local
			}
			attr := func(name string) string {
				for _, a := range el.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch el.Name.Local {
			case "g":
				series = attr("data-name")
			case "polyline":
				if _, dup := sh.polylines[series]; dup {
					t.Errorf("series %q has two polylines", series)
				}
				sh.polylines[series] = parsePoints(t, attr("points"))
			case "circle":
				sh.circles = append(sh.circles, point{parseFloat(t, attr("cx")), parseFloat(t, attr("cy"))})
			case "text":
				inText = true
			}
		case xml.EndElement:
			switch el.Name.Local {
			case "g":
				series = ""
			case "text":
				inText = false
			}
		case xml.CharData:
			if inText {
				sh.texts = append(sh.texts, string(el))
			}
		}
	}
	return sh
}

func parsePoints(t *testing.T, s string) []point {
	t.Helper()
	var out []point
	for f := range strings.FieldsSeq(s) {
		x, y, ok := strings.Cut(f, ",")
		if !ok {
			t.Fatalf("bad point %q", f)
		}
		out = append(out, point{parseFloat(t, x), parseFloat(t, y)})
	}
	return out
}

func parseFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("bad number %q: %v", s, err)
	}
	return v
}

func inPlot(p point) bool {
	return p.x >= plotL && p.x <= plotR && p.y >= plotT && p.y <= plotB
}

func TestChartSVG(t *testing.T) {
	for _, logY := range []bool{false, true} {
		t.Run("logY="+strconv.FormatBool(logY), func(t *testing.T) { testChartSVG(t, logY) })
	}
}

func testChartSVG(t *testing.T, logY bool) {
	c := &chart{logY: logY, title: "Many keys <N = 5> & more", xLabel: "goroutines", yLabel: "locks/s", logX: true,
		series: []series{
			{name: "redlock", pts: []point{{1, 1200}, {16, 9000}, {64, 21000}, {256, 23000}}},
			{name: "redsync & co", pts: []point{{1, 1000}, {16, 5000}, {64, 6000}, {256, 5500}}},
			{name: "redislock", pts: []point{{64, 0}}}, // one point, at the bottom
		}}
	var buf bytes.Buffer
	if err := c.writeSVG(&buf); err != nil {
		t.Fatal(err)
	}
	sh := parseSVG(t, buf.Bytes())
	if sh.root != "svg" {
		t.Errorf("root element %q, want svg", sh.root)
	}
	if len(sh.polylines) != len(c.series) {
		t.Errorf("%d polylines, want one per series (%d)", len(sh.polylines), len(c.series))
	}
	circles := 0
	for _, s := range c.series {
		pts, ok := sh.polylines[s.name]
		if !ok {
			t.Errorf("no polyline for %q", s.name)
			continue
		}
		if len(pts) != len(s.pts) {
			t.Errorf("%q: %d points, want %d", s.name, len(pts), len(s.pts))
		}
		for i, p := range pts {
			if !inPlot(p) {
				t.Errorf("%q: point %v outside the plot area", s.name, p)
			}
			// x grows with the data, y falls as the value rises (SVG's y
			// points down).
			if i > 0 && (p.x <= pts[i-1].x || (s.pts[i].y > s.pts[i-1].y) != (p.y < pts[i-1].y)) {
				t.Errorf("%q: point %d at %v does not follow %v as %v follows %v", s.name, i, p, pts[i-1], s.pts[i], s.pts[i-1])
			}
		}
		circles += len(s.pts)
	}
	if len(sh.circles) != circles {
		t.Errorf("%d circles, want one per point (%d)", len(sh.circles), circles)
	}
	for _, p := range sh.circles {
		if !inPlot(p) {
			t.Errorf("circle at %v outside the plot area", p)
		}
	}
	// The ends of the x axis are its first and last value; the highest
	// value is within the axis, not above it.
	red := sh.polylines["redlock"]
	if red[0].x != plotL || red[len(red)-1].x != plotR {
		t.Errorf("redlock's x from %v to %v, want %d to %d", red[0].x, red[len(red)-1].x, plotL, plotR)
	}
	text := strings.Join(sh.texts, "|")
	top := "25k"
	if logY {
		top = "100k"
	}
	for _, want := range []string{"goroutines", "locks/s", "redsync & co", "Many keys <N = 5> & more", "256", top} {
		if !strings.Contains(text, want) {
			t.Errorf("no text %q in %q", want, text)
		}
	}
}

// A chart of one x value, or of zeros only, has no range to divide by.
func TestChartDegenerate(t *testing.T) {
	for _, c := range []*chart{
		{series: []series{{name: "a", pts: []point{{5, 100}}}, {name: "b", pts: []point{{5, 300}}}}},
		{series: []series{{name: "a", pts: []point{{1, 0}, {3, 0}}}}},
		{series: []series{{name: "a"}}},
	} {
		var buf bytes.Buffer
		if err := c.writeSVG(&buf); err != nil {
			t.Fatal(err)
		}
		sh := parseSVG(t, buf.Bytes())
		for name, pts := range sh.polylines {
			for _, p := range pts {
				if !inPlot(p) {
					t.Errorf("%q: point %v outside the plot area\n%s", name, p, buf.String())
				}
			}
		}
	}
}

func TestNiceStep(t *testing.T) {
	for _, tc := range []struct{ in, want float64 }{{0.3, 0.5}, {1, 1}, {1.1, 2}, {4500, 5000}, {7000, 10000}} {
		if got := niceStep(tc.in); got != tc.want {
			t.Errorf("niceStep(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// The charts come from the results: p50 against N for the healthy
// uncontended scenarios, a line per library, and locks/s against goroutines
// for each N of many keys; writeCharts writes them into a directory.
func TestCharts(t *testing.T) {
	lat := func(lib string, d time.Duration) *sample { return &sample{lib: lib, lat: []time.Duration{d}} }
	rate := func(lib string, ops int) *sample {
		return &sample{lib: lib, lat: make([]time.Duration, ops), ops: ops, busy: time.Second}
	}
	results := []*result{
		{sc: &scenario{kind: uncontended, nodes: 1}, samples: []*sample{lat("redlock", 100e3), lat("redislock", 90e3)}},
		{sc: &scenario{kind: uncontended, nodes: 3}, samples: []*sample{lat("redlock", 200e3)}},
		{sc: &scenario{kind: uncontended, nodes: 5, slow: 1}, samples: []*sample{lat("redlock", 900e3)}},
		{sc: &scenario{kind: manyKeys, nodes: 1, goroutines: 1}, samples: []*sample{rate("redlock", 10), rate("redsync", 8)}},
		{sc: &scenario{kind: manyKeys, nodes: 1, goroutines: 64}, samples: []*sample{rate("redlock", 90), rate("redsync", 30)}},
		{sc: &scenario{kind: manyKeys, nodes: 5, goroutines: 64}, samples: []*sample{rate("redlock", 40)}},
		{sc: &scenario{kind: contention, nodes: 1, goroutines: 16}, samples: []*sample{rate("redlock", 5)}},
	}
	cs := charts(results)
	if len(cs) != 3 || cs[0].name != "uncontended-p50.svg" || cs[1].name != "manykeys-n1.svg" || cs[2].name != "manykeys-n5.svg" {
		t.Fatalf("charts %v", cs)
	}
	unc := cs[0].c.series
	if len(unc) != 2 || unc[0].name != "redlock" || len(unc[0].pts) != 2 || unc[0].pts[1] != (point{3, 200}) {
		t.Errorf("uncontended series %+v; want redlock at N=1 and 3 (not the slow scenario), redislock", unc)
	}
	keys := cs[1].c.series
	if len(keys) != 2 || keys[1].name != "redsync" || keys[1].pts[1] != (point{64, 30}) {
		t.Errorf("many-keys series %+v", keys)
	}
	dir := filepath.Join(t.TempDir(), "charts")
	paths, err := writeCharts(dir, results)
	if err != nil || len(paths) != 3 {
		t.Fatalf("writeCharts: %v, %v", paths, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, b)
	}
}

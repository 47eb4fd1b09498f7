package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The plot is a small hand-written SVG: two step charts sharing the time
// axis. A plotting library would need a new module dependency for what is
// forty lines of markup.

var plotColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// plotPanel is one chart: a step series per run.
type plotPanel struct {
	name   string
	series func(r *Result) (at []time.Duration, v []float64)
}

func pointSeries(val func(Point) int) func(r *Result) ([]time.Duration, []float64) {
	return func(r *Result) ([]time.Duration, []float64) {
		at, v := make([]time.Duration, len(r.Series)), make([]float64, len(r.Series))
		for i, p := range r.Series {
			at[i], v[i] = p.At, float64(val(p))
		}
		return at, v
	}
}

func loadSeries(val func(LoadPoint) float64) func(r *Result) ([]time.Duration, []float64) {
	return func(r *Result) ([]time.Duration, []float64) {
		at, v := make([]time.Duration, len(r.LoadSeries)), make([]float64, len(r.LoadSeries))
		for i, p := range r.LoadSeries {
			at[i], v[i] = p.At, val(p)
		}
		return at, v
	}
}

// WritePlot draws, for every run, the unavailable tasks and the tasks off
// balance over time; with load, the instances running, the total lag and
// the unavailable tasks.
func WritePlot(w io.Writer, title string, rs []*Result) error {
	panels := []plotPanel{
		{"unavailable tasks", pointSeries(func(p Point) int { return p.Unavailable })},
		{"tasks off balance", pointSeries(func(p Point) int { return p.OffBalance })},
	}
	for _, r := range rs {
		if r.Load != nil {
			panels = []plotPanel{
				{"instances running", loadSeries(func(p LoadPoint) float64 { return float64(p.Instances) })},
				{"total lag (records)", loadSeries(func(p LoadPoint) float64 { return p.Lag })},
				panels[0],
			}
			break
		}
	}
	const width, panelH, left, right, top, gap = 900, 220, 70, 150, 40, 60
	height := top + len(panels)*panelH + (len(panels)-1)*gap + 50
	var end time.Duration
	for _, r := range rs {
		end = max(end, r.End)
	}
	if end <= 0 {
		end = time.Second
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15">%s</text>`+"\n", left, xmlEscape(title))
	plotW := float64(width - left - right)
	for pi, panel := range panels {
		y0 := float64(top + pi*(panelH+gap))
		ymax := 1.0
		for _, r := range rs {
			_, vs := panel.series(r)
			for _, v := range vs {
				ymax = max(ymax, v)
			}
		}
		ymaxF := niceCeil(ymax)
		fmt.Fprintf(&b, `<text x="%d" y="%.0f">%s</text>`+"\n", left, y0-6, panel.name)
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="%.0f" height="%d" fill="none" stroke="#888"/>`+"\n", left, y0, plotW, panelH)
		for i := 0; i <= 4; i++ {
			v := ymaxF * float64(i) / 4
			y := y0 + panelH - float64(panelH)*float64(i)/4
			fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, float64(left)+plotW, y, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, fmtCount(v))
		}
		for i := 0; i <= 5; i++ {
			x := float64(left) + plotW*float64(i)/5
			t := time.Duration(float64(end) * float64(i) / 5)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x, y0+panelH+16, fmtDur(t.Round(time.Second)))
		}
		for ri, r := range rs {
			color := plotColors[ri%len(plotColors)]
			var pts []string
			xOf := func(t time.Duration) float64 { return float64(left) + plotW*float64(t)/float64(end) }
			yOf := func(v float64) float64 { return y0 + panelH - float64(panelH)*v/ymaxF }
			// A step line, at most a few points per pixel column: within a
			// column only the peak and the last value show.
			col := -1
			var prev, peak, last float64
			flush := func() {
				if col < 0 {
					return
				}
				x := float64(left) + float64(col)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, yOf(prev)), fmt.Sprintf("%.1f,%.1f", x, yOf(peak)), fmt.Sprintf("%.1f,%.1f", x, yOf(last)))
				prev = last
			}
			ats, vs := panel.series(r)
			for i, v := range vs {
				c := int(xOf(ats[i])) - left
				if c != col {
					flush()
					col, peak = c, v
				}
				peak, last = max(peak, v), v
			}
			flush()
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(end), yOf(prev)))
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			if pi == 0 {
				ly := top + 14 + 18*ri
				fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`, width-right+12, width-right+32, ly-4, ly-4, color)
				name := r.Policy
				if r.Autoscaler != "" {
					name += ", " + r.Autoscaler
				}
				fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", width-right+38, ly, xmlEscape(name))
			}
		}
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">simulated time</text>`+"\n", float64(left)+plotW/2, height-10)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func niceCeil(v float64) float64 {
	if v <= 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func xmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

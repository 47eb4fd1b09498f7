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

// WritePlot draws, for every run, the unavailable tasks and the tasks off
// balance over time.
func WritePlot(w io.Writer, title string, rs []*Result) error {
	const width, panelH, left, right, top, gap = 900, 220, 70, 150, 40, 60
	height := top + 2*panelH + gap + 50
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
	panels := []struct {
		name string
		val  func(Point) int
	}{
		{"unavailable tasks", func(p Point) int { return p.Unavailable }},
		{"tasks off balance", func(p Point) int { return p.OffBalance }},
	}
	for pi, panel := range panels {
		y0 := float64(top + pi*(panelH+gap))
		ymax := 1
		for _, r := range rs {
			for _, p := range r.Series {
				ymax = max(ymax, panel.val(p))
			}
		}
		ymaxF := niceCeil(float64(ymax))
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
			yOf := func(v int) float64 { return y0 + panelH - float64(panelH)*float64(v)/ymaxF }
			// A step line, at most a few points per pixel column: within a
			// column only the peak and the last value show.
			prev, col := 0, -1
			peak, last := 0, 0
			flush := func() {
				if col < 0 {
					return
				}
				x := float64(left) + float64(col)
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, yOf(prev)), fmt.Sprintf("%.1f,%.1f", x, yOf(peak)), fmt.Sprintf("%.1f,%.1f", x, yOf(last)))
				prev = last
			}
			for _, p := range r.Series {
				v := panel.val(p)
				c := int(xOf(p.At)) - left
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
				fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", width-right+38, ly, xmlEscape(r.Policy))
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

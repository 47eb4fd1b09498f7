package versus

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

var engineColors = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
}

// PlotBucket is the time resolution of the latency plots.
const PlotBucket = 500 * time.Millisecond

// LatencySeries returns, per PlotBucket from the start of the steady window
// to the end of the window after the event, the largest latency of the
// records that arrived in it, with x in seconds since the event. Buckets
// without arrivals are left out.
func LatencySeries(rec *Recording, ev Event) plotter.XYs {
	from, to := ev.At-ev.Steady, ev.At+ev.After
	worst := map[int64]time.Duration{}
	for _, a := range rec.Arrivals {
		if a.At < from || a.At > to {
			continue
		}
		b := int64((a.At - ev.At) / PlotBucket)
		if a.At < ev.At {
			b-- // integer division rounds towards zero: keep buckets aligned on the event
		}
		worst[b] = max(worst[b], a.Latency)
	}
	keys := make([]int64, 0, len(worst))
	for b := range worst {
		keys = append(keys, b)
	}
	slices.Sort(keys)
	pts := make(plotter.XYs, 0, len(keys))
	for _, b := range keys {
		pts = append(pts, plotter.XY{X: (time.Duration(b) * PlotBucket).Seconds(), Y: worst[b].Seconds()})
	}
	return pts
}

// PlotEvents draws, per event, the largest end-to-end latency per half
// second of every configuration over the steady window and the window
// after the event, the event at x = 0, as SVG and PNG in dir. It returns
// the files written.
func PlotEvents(res *Result, dir string) ([]string, error) {
	var events []string
	for _, r := range res.Runs {
		if r.Recording != nil && !slices.Contains(events, r.Event) {
			events = append(events, r.Event)
		}
	}
	var files []string
	for _, ev := range events {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: largest end-to-end latency per %v (event at 0)", ev, PlotBucket)
		p.X.Label.Text = "seconds since the event"
		p.Y.Label.Text = "latency (s)"
		var top float64
		i := 0
		for _, r := range res.Runs {
			if r.Event != ev || r.Recording == nil {
				continue
			}
			pts := LatencySeries(r.Recording, r.Window)
			if len(pts) == 0 {
				continue
			}
			l, err := plotter.NewLine(pts)
			if err != nil {
				return files, err
			}
			l.Color = engineColors[i%len(engineColors)]
			l.Width = vg.Points(1)
			i++
			p.Add(l)
			p.Legend.Add(r.Configuration, l)
			for _, pt := range pts {
				top = max(top, pt.Y)
			}
		}
		mark, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: max(top, 0.001)}})
		if err != nil {
			return files, err
		}
		mark.Color = color.Gray{Y: 0x40}
		mark.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(mark)
		p.Y.Min = 0
		p.Legend.Top = true
		for _, ext := range []string{"svg", "png"} {
			path := filepath.Join(dir, fmt.Sprintf("latency-%s.%s", ev, ext))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return files, err
			}
			if err := p.Save(24*vg.Centimeter, 12*vg.Centimeter, path); err != nil {
				return files, fmt.Errorf("versus: plot %s: %w", path, err)
			}
			files = append(files, path)
		}
	}
	return files, nil
}

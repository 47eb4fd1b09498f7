package bench

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var (
	instanceColors = []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff}, color.RGBA{0xe3, 0x77, 0xc2, 0xff},
		color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff}, color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	}
	movedColor   = color.RGBA{0xd6, 0x27, 0x28, 0xff}
	unmovedColor = color.RGBA{0x1f, 0x77, 0xb4, 0xff}
	markColor    = color.RGBA{0x40, 0x40, 0x40, 0xff}
)

// PlotScale draws, as SVG or PNG after path's extension, one row per policy: the records/s each instance
// processed over time with the events marked, and the longest processing
// gap of every task during each event (moved tasks red, unmoved blue, the
// unmoved tasks' normal gap as a grey tick).
func PlotScale(res *ScaleResult, path string) error {
	rows := make([][]*plot.Plot, 0, len(res.Runs))
	for _, r := range res.Runs {
		tp, err := throughputPlot(r)
		if err != nil {
			return err
		}
		gp, err := gapPlot(r)
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{tp, gp})
	}
	if len(rows) == 0 {
		return fmt.Errorf("bench: nothing to plot")
	}
	w, h := 30*vg.Centimeter, vg.Length(len(rows))*8*vg.Centimeter
	c, err := draw.NewFormattedCanvas(w, h, strings.TrimPrefix(filepath.Ext(path), "."))
	if err != nil {
		return fmt.Errorf("bench: plot %s: %w", path, err)
	}
	dc := draw.New(c)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: vg.Centimeter, PadY: vg.Centimeter,
		PadTop: vg.Length(4), PadBottom: vg.Length(4), PadLeft: vg.Length(4), PadRight: vg.Length(4)}
	canvases := plot.Align(rows, tiles, dc)
	for i, row := range rows {
		for j, p := range row {
			p.Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func throughputPlot(r PolicyRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: records/s per instance", r.Policy)
	p.X.Label.Text = "s"
	p.Y.Label.Text = "records/s"
	ids := make([]string, 0, len(r.Throughput))
	for id := range r.Throughput {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	// Skip the prefill: start the picture one baseline before the first
	// event.
	from := 0.0
	if len(r.Events) > 0 {
		from = max(0, (r.Events[0].Start - r.Events[0].Baseline).Seconds())
	}
	var top float64
	for i, id := range ids {
		var pts plotter.XYs
		for b, v := range r.Throughput[id] {
			x := float64(b) * r.Bucket.Seconds()
			if x < from {
				continue
			}
			pts = append(pts, plotter.XY{X: x, Y: v})
			top = max(top, v)
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		l.Color = instanceColors[i%len(instanceColors)]
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(id, l)
	}
	for _, e := range r.Events {
		x := e.Start.Seconds()
		l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
		if err != nil {
			return nil, err
		}
		l.Color = markColor
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(l)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: top}}, Labels: []string{e.Event}})
		if err != nil {
			return nil, err
		}
		for i := range lab.TextStyle {
			lab.TextStyle[i].Font.Size = vg.Points(7)
		}
		p.Add(lab)
	}
	p.X.Min = from
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

func gapPlot(r PolicyRun) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: longest gap per task during each event", r.Policy)
	p.Y.Label.Text = "seconds"
	var moved, unmoved, normal plotter.XYs
	names := make([]string, len(r.Events))
	for i, e := range r.Events {
		names[i] = e.Event
		for j, t := range e.Tasks {
			x := float64(i) + 0.6*(float64(j)/float64(max(1, len(e.Tasks)-1))-0.5)
			if t.Moved {
				moved = append(moved, plotter.XY{X: x, Y: t.LongestGap.Seconds()})
			} else {
				unmoved = append(unmoved, plotter.XY{X: x, Y: t.LongestGap.Seconds()})
				normal = append(normal, plotter.XY{X: x, Y: t.NormalGap.Seconds()})
			}
		}
	}
	add := func(pts plotter.XYs, c color.Color, shape draw.GlyphDrawer, label string) error {
		if len(pts) == 0 {
			return nil
		}
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color = c
		s.GlyphStyle.Shape = shape
		s.GlyphStyle.Radius = vg.Points(2.5)
		p.Add(s)
		p.Legend.Add(label, s)
		return nil
	}
	if err := add(normal, color.Gray{Y: 0x99}, draw.CrossGlyph{}, "unmoved: normal gap"); err != nil {
		return nil, err
	}
	if err := add(unmoved, unmovedColor, draw.CircleGlyph{}, "unmoved task"); err != nil {
		return nil, err
	}
	if err := add(moved, movedColor, draw.TriangleGlyph{}, "moved task (handover)"); err != nil {
		return nil, err
	}
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(7)
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	return p, nil
}

package main

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/llmgw/gateway/cmd/bench/results"
)

// The chart's size: two panels side by side, readable when the doc scales it
// to a page's width.
const (
	chartDPI    = 96
	chartWidth  = 12 * vg.Inch // 1152 px
	chartHeight = 5 * vg.Inch  // 480 px
)

var (
	gatewayColor  = color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	baselineColor = color.RGBA{R: 0xe0, G: 0x7b, B: 0x10, A: 0xff}
)

// errNoFigures: the run has neither open-loop nor stream scenarios to draw.
var errNoFigures = fmt.Errorf("benchchart: the run has no open-loop or stream scenarios to draw")

// drawChart writes the PNG: on the left the latency the gateway and the bare
// proxy add over direct at each open-loop rate, on the right the time they add
// to the first chunk at each stream rate; p50 solid, p99 dashed.
func drawChart(w io.Writer, run *results.Run) error {
	open, stream := run.Of(results.Open), run.Of(results.Stream)
	if len(open) == 0 && len(stream) == 0 {
		return errNoFigures
	}
	left, err := panel("Added latency, non-streaming (open loop)", "requests per second", open, false)
	if err != nil {
		return err
	}
	right, err := panel("Added time to first chunk, streaming", "streams per second", stream, true)
	if err != nil {
		return err
	}
	img := vgimg.NewWith(vgimg.UseWH(chartWidth, chartHeight), vgimg.UseDPI(chartDPI))
	dc := draw.New(img)
	mode := run.Mode
	if len(run.Only) > 0 {
		mode += ", BENCH_ONLY=" + strings.Join(run.Only, ",")
	}
	caption := fmt.Sprintf("make bench (%s), %s: gateway and bare proxy (httputil.ReverseProxy), each over direct; medians of rounds",
		mode, run.Measured.UTC().Format("2006-01-02 15:04 MST"))
	sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 11), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YTop}
	dc.FillText(sty, vg.Point{X: chartWidth / 2, Y: chartHeight - 4}, caption)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadTop: 24, PadBottom: 4, PadLeft: 4, PadRight: 12, PadX: 24}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, dc)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// panel is one side of the chart: four lines (gateway and bare proxy, p50 and
// p99) over the scenarios' rates.
func panel(title, xLabel string, scs []results.Scenario, first bool) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = 14
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "added over direct (ms)"
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.YOffs = -4
	p.Legend.XOffs = 6
	p.Add(plotter.NewGrid())
	var ticks plot.ConstantTicks
	lo, hi := 0.0, 0.0
	for _, sc := range scs {
		ticks = append(ticks, plot.Tick{Value: float64(sc.Rate), Label: fmt.Sprint(sc.Rate)})
		lo, hi = min(lo, float64(sc.Rate)), max(hi, float64(sc.Rate))
	}
	if len(scs) == 0 {
		p.Title.Text += " (not run)"
		p.HideAxes()
		return p, nil
	}
	p.X.Tick.Marker = ticks
	// Some room either side of the first and last rate, and the y axis from 0
	// (noise can put an added p50 below it; the axis then follows).
	pad := max(100, (hi-ticks[0].Value)*0.08)
	p.X.Min, p.X.Max = ticks[0].Value-pad, hi+pad
	p.Y.Min = 0
	top := 0.0
	for _, who := range []struct {
		target, name string
		color        color.Color
	}{{results.Gateway, "gateway", gatewayColor}, {results.Baseline, "bare proxy", baselineColor}} {
		for _, q := range []struct {
			name   string
			of     func(results.Percentiles) float64
			dashed bool
		}{{"p50", func(p results.Percentiles) float64 { return p.P50 }, false}, {"p99", func(p results.Percentiles) float64 { return p.P99 }, true}} {
			var xys plotter.XYs
			for _, sc := range scs {
				side := sc.Per[who.target]
				v := side.Added
				if first {
					v = side.AddedFirst
				}
				if v == nil {
					continue
				}
				xys = append(xys, plotter.XY{X: float64(sc.Rate), Y: q.of(*v)})
			}
			if len(xys) == 0 {
				continue
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, err
			}
			line.Color, line.Width = who.color, vg.Points(2)
			if q.dashed {
				line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			points.Color, points.Shape, points.Radius = who.color, draw.CircleGlyph{}, vg.Points(3)
			if q.dashed {
				points.Shape = draw.BoxGlyph{}
			}
			p.Add(line, points)
			p.Legend.Add(who.name+" "+q.name, line, points)
			for _, xy := range xys {
				p.Y.Min, top = min(p.Y.Min, xy.Y), max(top, xy.Y)
			}
		}
	}
	// Headroom over the highest point, for the legend in the top corner.
	p.Y.Max = top * 1.35
	p.Y.Tick.Marker = evenTicks{}
	return p, nil
}

// evenTicks labels the y axis every nice step (1, 2 or 5 times a power of
// ten), about six labels over the range: plot's default labels only a few.
type evenTicks struct{}

func (evenTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := (hi - lo) / 6
	step := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*step >= raw {
			step *= m
			break
		}
	}
	var out []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step/1e6; v += step {
		out = append(out, plot.Tick{Value: v, Label: strconv.FormatFloat(math.Round(v/step)*step, 'f', -1, 64)})
	}
	return out
}

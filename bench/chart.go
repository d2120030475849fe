package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The chart: one row per figure, grouped by section; on the left panel
// throughput, on the right p99 latency, both on log scales (the figures
// span four decades), mailplane's bar above its baseline's.
const (
	chartWidth  = 1500
	labelWidth  = 250
	panelGap    = 150
	margin      = 20
	headerH     = 70
	sectionH    = 24
	barH        = 11
	rowH        = 2*barH + 6
	axisH       = 20
	valueRoomPx = 70 // room for the value printed after the longest bar
)

var (
	colMailplane = color.RGBA{0x1f, 0x6f, 0xb4, 0xff}
	colBaseline  = color.RGBA{0xa8, 0xa8, 0xa8, 0xff}
	colGrid      = color.RGBA{0xe4, 0xe4, 0xe4, 0xff}
	colText      = color.RGBA{0x20, 0x20, 0x20, 0xff}
	colMuted     = color.RGBA{0x70, 0x70, 0x70, 0xff}
)

// chartGroup is a titled run of rows.
type chartGroup struct {
	title string
	rows  []Pair
	store bool // rows of both stores: the label names the store
}

func chartGroups(r *Report) []chartGroup {
	var gs []chartGroup
	add := func(title string, rows []Pair) {
		if len(rows) > 0 {
			gs = append(gs, chartGroup{title: title, rows: rows, store: rows[0].Section == "reads"})
		}
	}
	add("Ingest, embedded store: baseline: null HTTP handler / null go-smtp server", r.section("ingest", "embedded"))
	add("Ingest, Mailpit store: baseline: raw SMTP into the same Mailpit", r.section("ingest", "Mailpit"))
	add("Reads through mail-gateway: baseline: Mailpit's API; wake-up: POST then GET", r.section("reads", ""))
	add("Density: baseline: the reference's MailPlane.trial() / a stack with 0 live / the same round without open and close", r.section("density", ""))
	return gs
}

// logScale maps values in [lo, hi] (whole decades) onto [x0, x0+w].
type logScale struct {
	lo, hi float64
	x0, w  int
}

func newLogScale(values []float64, x0, w int) logScale {
	lo, hi := math.Inf(1), 0.0
	for _, v := range values {
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	if hi == 0 {
		lo, hi = 1, 10
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return logScale{lo: lo, hi: hi, x0: x0, w: w}
}

func (s logScale) x(v float64) int {
	if v <= s.lo {
		return s.x0 + 1
	}
	f := (math.Log10(v) - math.Log10(s.lo)) / (math.Log10(s.hi) - math.Log10(s.lo))
	return s.x0 + int(f*float64(s.w))
}

// decades are the axis ticks: lo, 10·lo, …, hi.
func (s logScale) decades() []float64 {
	var d []float64
	for v := s.lo; v <= s.hi*1.0001; v *= 10 {
		d = append(d, v)
	}
	return d
}

// drawChart draws r as a PNG into w. basicfont has ASCII only, so every
// string drawn is ASCII.
func drawChart(w io.Writer, r *Report) error {
	groups := chartGroups(r)
	height := headerH + axisH + margin
	var rates, p99s []float64
	for _, g := range groups {
		height += sectionH + len(g.rows)*rowH
		for _, p := range g.rows {
			rates = append(rates, p.Mailplane.Rate, p.Baseline.Rate)
			p99s = append(p99s, p.Mailplane.P99, p.Baseline.P99)
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, chartWidth, height))
	draw.Draw(img, img.Bounds(), image.White, image.Point{}, draw.Src)
	panelW := (chartWidth - 2*margin - labelWidth - panelGap - 2*valueRoomPx) / 2
	left := newLogScale(rates, margin+labelWidth, panelW)
	right := newLogScale(p99s, margin+labelWidth+panelW+valueRoomPx+panelGap, panelW)

	m := r.Machine
	text(img, margin, 20, colText, "mailplane: throughput and p99 per path, each next to its baseline from the same run")
	text(img, margin, 38, colMuted, fmt.Sprintf("%s, %d cores, %s, %s; commit %s; %s; other processes used %.0f%% of the CPU during the run",
		m.CPU, m.Cores, m.Kernel, m.Go, m.Commit, r.Started.Format("2006-01-02"), m.OtherCPU))
	legend := margin
	fillRect(img, legend, 50, 14, barH+2, colMailplane)
	text(img, legend+20, 59, colText, "mailplane")
	fillRect(img, legend+110, 50, 14, barH+2, colBaseline)
	text(img, legend+130, 59, colText, "baseline")
	text(img, left.x0, headerH-2, colText, "throughput, operations/s (log scale)")
	text(img, right.x0, headerH-2, colText, "p99 latency, ms (log scale)")

	top := headerH + axisH
	bottom := height - margin
	for _, s := range []logScale{left, right} {
		for _, d := range s.decades() {
			x := s.x(d)
			if d == s.lo {
				x = s.x0
			}
			fillRect(img, x, top, 1, bottom-top, colGrid)
			text(img, x-3*len(num(d)), top-6, colMuted, num(d))
		}
	}
	y := top
	for _, g := range groups {
		text(img, margin, y+sectionH-7, colText, g.title)
		y += sectionH
		for _, p := range g.rows {
			label := p.Path
			if p.Size != "" {
				label += ", " + p.Size
			}
			label += fmt.Sprintf(", c%d", p.Conc)
			if g.store {
				label = p.Store + ": " + label
			}
			text(img, margin, y+barH+4, colText, label)
			bar(img, left, y, p.Mailplane.Rate, colMailplane, rateLabel(p.Mailplane.Rate))
			bar(img, left, y+barH, p.Baseline.Rate, colBaseline, rateLabel(p.Baseline.Rate))
			bar(img, right, y, p.Mailplane.P99, colMailplane, fmt.Sprintf("%.2f", p.Mailplane.P99))
			bar(img, right, y+barH, p.Baseline.P99, colBaseline, fmt.Sprintf("%.2f", p.Baseline.P99))
			y += rowH
		}
	}
	return png.Encode(w, img)
}

// bar draws one bar from the scale's origin to v, with its value after it;
// a figure with no value (a wake-up has no rate) gets a dash.
func bar(img *image.RGBA, s logScale, y int, v float64, c color.Color, label string) {
	if v <= 0 {
		text(img, s.x0+3, y+barH-1, colMuted, "-")
		return
	}
	x := s.x(v)
	fillRect(img, s.x0, y, max(1, x-s.x0), barH-1, c)
	text(img, x+4, y+barH-1, colMuted, label)
}

func rateLabel(v float64) string {
	if v <= 0 {
		return ""
	}
	return fmt.Sprintf("%.0f", v)
}

// num prints an axis value: 0.01, 0.1, 1, 10, 100, 1k, 10k…
func num(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.0fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%g", v)
	}
}

func fillRect(img *image.RGBA, x, y, w, h int, c color.Color) {
	draw.Draw(img, image.Rect(x, y, x+w, y+h), image.NewUniform(c), image.Point{}, draw.Src)
}

// text draws s with its baseline at y.
func text(img *image.RGBA, x, y int, c color.Color, s string) {
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

// Command handoffplot runs the hot-key scenario of BenchmarkHotKey for
// redlock and go-redsync, records every hand-off and every Acquire wait, and
// plots their distributions (CDFs on a log axis) to a PNG.
//
//	go run ./cmd/handoffplot -out ../docs/handoff.png
//
// It starts its own redis-servers (no persistence) unless -addrs is given.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/e6344662/go-redlock/bench/internal/hotkey"
	"github.com/e6344662/go-redlock/bench/internal/impls"
	"github.com/e6344662/go-redlock/bench/internal/redisproc"
	"github.com/e6344662/go-redlock/bench/internal/stats"
	"github.com/e6344662/go-redlock/redlock"
	"github.com/e6344662/go-redlock/redlock/redisnode"
)

func main() {
	var (
		out      = flag.String("out", "handoff.png", "PNG to write")
		csvDir   = flag.String("csv", "", "directory for one CSV of samples per implementation (optional)")
		addrs    = flag.String("addrs", "", "comma-separated host:port of existing servers (default: start -nodes servers)")
		nodes    = flag.Int("nodes", 3, "servers to start when -addrs is empty")
		workers  = flag.Int("workers", 4, "workers contending for the key")
		hold     = flag.Duration("hold", time.Millisecond, "how long each holder keeps the lock")
		duration = flag.Duration("duration", 15*time.Second, "run time per implementation")
	)
	flag.Parse()
	log.SetFlags(0)
	if err := run(*out, *csvDir, *addrs, *nodes, *workers, *hold, *duration); err != nil {
		log.Fatal(err)
	}
}

// run does the work of main, returning errors so that its deferred clean-up
// (the servers it started) always runs.
func run(out, csvDir, addrs string, nodes, workers int, hold, duration time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	list := strings.Split(addrs, ",")
	if addrs == "" {
		servers, err := redisproc.Start(ctx, nodes)
		if err != nil {
			return err
		}
		defer redisproc.Stop(servers)
		list = list[:0]
		for _, s := range servers {
			list = append(list, s.Addr)
		}
	}

	var clients []*redis.Client
	newClients := func() []*redis.Client {
		cs := make([]*redis.Client, len(list))
		for i, a := range list {
			cs[i] = redisproc.Client(strings.TrimSpace(a))
		}
		clients = append(clients, cs...)
		return cs
	}
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	var ns []redlock.Node
	for _, c := range newClients() {
		ns = append(ns, redisnode.New(c))
	}
	rl, err := impls.Redlock("redlock", ns, impls.Wait, true)
	if err != nil {
		return err
	}
	wait := impls.RedsyncOptions{Tries: 1 << 30}
	wait10 := impls.RedsyncOptions{Tries: 1 << 30, RetryDelay: 10 * time.Millisecond}
	runs := []result{
		{impl: rl, label: "redlock (pub/sub wake-up)"},
		{impl: impls.Redsync("redsync", newClients(), wait), label: "redsync, default retry delay 50-250ms"},
		{impl: impls.Redsync("redsync-10ms", newClients(), wait10), label: "redsync, retry delay 10ms"},
	}

	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "impl\tacq/s\tacq\thand-offs\thandoff p50\tp99\tmax\twait p99\tshare max/min\t\n")
	for i := range runs {
		r := &runs[i]
		ws := make([]impls.Worker, workers)
		for j := range ws {
			ws[j] = r.impl.NewWorker()
		}
		log.Printf("running %s: %d workers on %d nodes, hold %s, for %s", r.impl.Name, workers, len(list), hold, duration)
		r.res = hotkey.Run(ctx, ws, hotkey.Options{
			Key: fmt.Sprintf("handoffplot:%s:%d", r.impl.Name, time.Now().UnixNano()), Hold: hold, Duration: duration,
		})
		if err := r.impl.Close(); err != nil {
			log.Print(err)
		}
		if ctx.Err() != nil {
			return errors.New("interrupted")
		}
		if r.res.Overlaps > 0 || r.res.Errors > 0 {
			log.Printf("%s: %d overlapping acquisitions, %d errors", r.impl.Name, r.res.Overlaps, r.res.Errors)
		}
		share, _ := r.res.ShareRatio()
		h := slices.Clone(r.res.Handoffs)
		wt := slices.Clone(r.res.Waits)
		fmt.Fprintf(tw, "%s\t%.0f\t%d\t%d\t%s\t%s\t%s\t%s\t%.2f\t\n", r.impl.Name, r.res.Rate(), r.res.Acquisitions, len(h),
			us(stats.Quantile(h, 0.5)), us(stats.Quantile(h, 0.99)), us(stats.Quantile(h, 1)), us(stats.Quantile(wt, 0.99)), share)
		if csvDir != "" {
			if err := writeCSV(filepath.Join(csvDir, "handoff-"+r.impl.Name+".csv"), r.res); err != nil {
				return err
			}
		}
	}
	_ = tw.Flush()
	title := fmt.Sprintf("one hot key, %d workers holding %s, %d nodes, %s per implementation", workers, hold, len(list), duration)
	if err := plotCDFs(out, title, runs); err != nil {
		return err
	}
	log.Printf("wrote %s", out)
	return nil
}

type result struct {
	impl  *impls.Impl
	label string
	res   hotkey.Result
}

func us(d time.Duration) string { return strconv.FormatFloat(stats.Micros(d), 'f', 0, 64) + "us" }

// writeCSV writes the samples of one run: a row per hand-off latency, then
// a row per Acquire wait.
func writeCSV(path string, r hotkey.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"kind", "microseconds"})
	for _, d := range r.Handoffs {
		_ = w.Write([]string{"handoff", strconv.FormatFloat(stats.Micros(d), 'f', 1, 64)})
	}
	for _, d := range r.Waits {
		_ = w.Write([]string{"wait", strconv.FormatFloat(stats.Micros(d), 'f', 1, 64)})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// plotCDFs draws two panels side by side: the CDF of hand-off latency to a
// different worker, and the CDF of every Acquire call's wait.
func plotCDFs(path, title string, runs []result) error {
	colors := []color.Color{
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	}
	panel := func(name string, pick func(hotkey.Result) []time.Duration, what string) (*plot.Plot, error) {
		p := plot.New()
		p.Title.Text = name
		p.X.Label.Text = "milliseconds (log scale)"
		p.Y.Label.Text = "fraction ≤ x"
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min, p.Y.Max = 0, 1
		p.Add(plotter.NewGrid())
		p.Legend.Top = false
		p.Legend.Left = false
		for i, r := range runs {
			ds := slices.Clone(pick(r.res))
			if len(ds) == 0 {
				continue
			}
			slices.Sort(ds)
			pts := make(plotter.XYs, 0, len(ds)+1)
			for j, d := range ds {
				ms := max(float64(d)/float64(time.Millisecond), 0.01) // log axis: no zero
				pts = append(pts, plotter.XY{X: ms, Y: float64(j+1) / float64(len(ds))})
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return nil, err
			}
			line.Color = colors[i%len(colors)]
			line.Width = vg.Points(1.5)
			if i > 0 {
				line.Dashes = []vg.Length{vg.Points(float64(2 + 2*i)), vg.Points(2)}
			}
			p.Add(line)
			p.Legend.Add(fmt.Sprintf("%s (%d %s)", r.label, len(ds), what), line)
		}
		return p, nil
	}
	left, err := panel("hand-off to a different worker", func(r hotkey.Result) []time.Duration { return r.Handoffs }, "hand-offs")
	if err != nil {
		return err
	}
	right, err := panel("Acquire wait (every acquisition)", func(r hotkey.Result) []time.Duration { return r.Waits }, "acquisitions")
	if err != nil {
		return err
	}

	const w, h = 30 * vg.Centimeter, 13 * vg.Centimeter
	img := vgimg.New(w, h)
	dc := draw.New(img)
	top := dc
	top.Min.Y = dc.Max.Y - vg.Centimeter
	body := dc
	body.Max.Y = top.Min.Y
	top.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YCenter}, vg.Point{X: (dc.Min.X + dc.Max.X) / 2, Y: (top.Min.Y + top.Max.Y) / 2}, title)
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Centimeter, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 5, PadBottom: vg.Millimeter * 3}
	canvases := plot.Align([][]*plot.Plot{{left, right}}, tiles, body)
	left.Draw(canvases[0][0])
	right.Draw(canvases[0][1])

	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Command targets reads raw `go test -bench` output of this module (one or
// more files, any -count) and prints, as Markdown, issue 5's targets next to
// what the run reached: medians over the runs of each benchmark, as ratios
// against the baselines measured in the same run.
//
//	go run ./cmd/targets results/raw.txt
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// samples maps benchmark name (without the -GOMAXPROCS suffix) and unit to
// the values of every run.
type samples map[string]map[string][]float64

var procs = regexp.MustCompile(`-\d+$`)

func parse(r io.Reader, s samples) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := procs.ReplaceAllString(strings.TrimPrefix(f[0], "Benchmark"), "")
		if s[name] == nil {
			s[name] = map[string][]float64{}
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s[name][f[i+1]] = append(s[name][f[i+1]], v)
		}
	}
	return sc.Err()
}

// median returns the median of name's unit and how many runs it has; ok is
// false when the benchmark or unit is missing.
func (s samples) median(name, unit string) (m float64, runs int, ok bool) {
	vs := slices.Clone(s[name][unit])
	if len(vs) == 0 {
		return 0, 0, false
	}
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2], len(vs), true
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2, len(vs), true
}

// row is one line of the targets table.
type row struct {
	what, bench, unit, base, op string
	limit                       float64
	absolute                    bool // limit applies to the value itself (already a ratio, or absolute)
}

func main() {
	flag.Parse()
	s := samples{}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			log.Fatal(err)
		}
		if err := parse(f, s); err != nil {
			log.Fatal(err)
		}
		_ = f.Close()
	}
	if len(s) == 0 {
		log.Fatal("targets: no benchmark results in the input")
	}

	var rows []row
	for _, n := range []int{3, 5} {
		in := fmt.Sprintf("Interleaved/N=%d", n)
		rows = append(rows,
			row{what: fmt.Sprintf("uncontended N=%d, interleaved: ops/s vs redsync", n), bench: in, unit: "ops-vs-redsync", op: ">=", limit: 1.1, absolute: true},
			row{what: fmt.Sprintf("uncontended N=%d, interleaved: p50 vs floor", n), bench: in, unit: "p50-vs-floor", op: "<=", limit: 1.05, absolute: true},
		)
	}
	for _, n := range []int{3, 5} {
		u := fmt.Sprintf("Uncontended/N=%d/impl=", n)
		rows = append(rows,
			row{what: fmt.Sprintf("uncontended N=%d: ops/s vs redsync", n), bench: u + "redlock", unit: "ops/s", base: u + "redsync", op: ">=", limit: 1.1},
			row{what: fmt.Sprintf("uncontended N=%d: p50 vs floor", n), bench: u + "redlock", unit: "p50-us", base: u + "floor", op: "<=", limit: 1.05},
		)
	}
	for _, w := range []int{4, 16} {
		for _, impl := range []string{"redlock", "redlock-own"} {
			h := fmt.Sprintf("HotKey/N=3/workers=%d/impl=", w)
			label := fmt.Sprintf("hot key, %d workers, %s:", w, impl)
			rows = append(rows,
				row{what: label + " hand-off p99 (us)", bench: h + impl, unit: "handoff-p99-us", op: "<=", limit: 5000, absolute: true},
				row{what: label + " acq/s vs redsync", bench: h + impl, unit: "acq/s", base: h + "redsync", op: ">=", limit: 0.9},
				row{what: label + " share max/min", bench: h + impl, unit: "share-max/min", op: "<=", limit: 2, absolute: true},
			)
		}
	}
	for _, n := range []int{1, 3, 5, 7} {
		for _, b := range []string{"Uncontended", "Parallel"} {
			p := fmt.Sprintf("%s/N=%d/impl=", b, n)
			rows = append(rows, row{what: fmt.Sprintf("%s N=%d: allocs/op vs redsync", strings.ToLower(b), n), bench: p + "redlock", unit: "allocs/op", base: p + "redsync", op: "<=", limit: 1})
		}
	}

	fmt.Println("| target | redlock | baseline | ratio | goal | met |")
	fmt.Println("| --- | ---: | ---: | ---: | --- | --- |")
	for _, r := range rows {
		v, _, ok := s.median(r.bench, r.unit)
		if !ok {
			continue
		}
		got, baseCell, ratioCell := v, "", ""
		if !r.absolute {
			b, _, ok := s.median(r.base, r.unit)
			if !ok || b == 0 {
				continue
			}
			got = v / b
			baseCell = num(b)
			ratioCell = fmt.Sprintf("%.3f", got)
		}
		met := (r.op == ">=" && got >= r.limit) || (r.op == "<=" && got <= r.limit)
		verdict := "yes"
		if !met {
			verdict = "**no**"
		}
		fmt.Printf("| %s | %s | %s | %s | %s %s | %s |\n", r.what, num(v), baseCell, ratioCell, r.op, num(r.limit), verdict)
	}
	fmt.Println()
	fmt.Println("Medians over the runs of each benchmark; ratio = redlock / baseline, both from this run.")
}

func num(v float64) string {
	switch {
	case v >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case v >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

package model

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// headerLines is how near its top a script must name its model steps.
const headerLines = 3

var (
	scriptStep = regexp.MustCompile(`^-- model: ([a-z_]+(?:, [a-z_]+)*)$`)
	modelStep  = regexp.MustCompile(`/\*\s*step:\s*([a-z_]+)`)
)

// scriptSteps reads the "-- model:" line of every Lua script in dir: the
// steps each names.
func scriptSteps(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Lua scripts in %s", dir)
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		var found []string
		for i, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "-- model:") {
				continue
			}
			m := scriptStep.FindStringSubmatch(line)
			switch {
			case m == nil:
				t.Errorf("%s:%d: %q is not of the form \"-- model: <step>[, <step>...]\"", name, i+1, line)
			case i >= headerLines:
				t.Errorf("%s:%d: the \"-- model:\" line must be among the first %d lines", name, i+1, headerLines)
			case found != nil:
				t.Errorf("%s:%d: a second \"-- model:\" line", name, i+1)
			default:
				found = strings.Split(m[1], ", ")
			}
		}
		if found == nil {
			t.Errorf("%s names no model step (a \"-- model: <step>\" line near its top)", name)
			continue
		}
		out[name] = found
	}
	return out
}

// modelSteps reads the steps the Promela files in dir mark.
func modelSteps(t *testing.T, dir string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Promela files in %s", dir)
	}
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range modelStep.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = append(out[m[1]], filepath.Base(f))
		}
	}
	return out
}

// TestScriptsAndModelNameTheSameSteps fails when a script names a step the
// model does not mark, or the model marks a step no script names.
func TestScriptsAndModelNameTheSameSteps(t *testing.T) {
	scripts := scriptSteps(t, filepath.Join("..", "scripts"))
	steps := modelSteps(t, ".")
	named := map[string]bool{}
	for _, name := range sorted(scripts) {
		for _, s := range scripts[name] {
			named[s] = true
			if steps[s] == nil {
				t.Errorf("scripts/%s names model step %q, which no model/*.pml marks (/* step: %s */)", name, s, s)
			}
		}
	}
	for _, s := range sorted(steps) {
		if !named[s] {
			t.Errorf("model step %q (%s) is named by no script's \"-- model:\" line", s, strings.Join(steps[s], ", "))
		}
	}
}

// TestStepPatterns: the two patterns read what they should, so that the
// test above cannot pass by reading nothing.
func TestStepPatterns(t *testing.T) {
	for _, c := range []struct {
		line string
		want string
	}{
		{"-- model: acquire", "acquire"},
		{"-- model: q_scan, q_join", "q_scan, q_join"},
		{"-- model: acquire,release", ""},
		{"-- model:", ""},
		{"--model: acquire", ""},
	} {
		got := ""
		if m := scriptStep.FindStringSubmatch(c.line); m != nil {
			got = m[1]
		}
		if got != c.want {
			t.Errorf("%q: read %q, want %q", c.line, got, c.want)
		}
	}
	m := modelStep.FindAllStringSubmatch("/* step: acquire */ x /*step:fence (the rest) */", -1)
	if len(m) != 2 || m[0][1] != "acquire" || m[1][1] != "fence" {
		t.Errorf("model step pattern read %v", m)
	}
}

func sorted[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

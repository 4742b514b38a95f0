package readmetest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	modulePath = "github.com/e6344662/go-redlock"
	marker     = "<!-- compiled by internal/readmetest"
)

// snippet is one marked ```go block of the README.
type snippet struct {
	section string // the heading above it
	line    int    // the line of its first code line, 1-based
	code    string
}

// TestREADMEProgramsCompile builds every marked Go block of README.md as the
// main package of a module of its own that requires this repository
// (replaced by the working tree), and runs go vet on it.
func TestREADMEProgramsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	root := repoRoot(t)
	snippets := markedSnippets(t, filepath.Join(root, "README.md"))
	if !hasSection(snippets, "## Use it") {
		t.Fatalf("README.md: no Go block under %q is marked %q: the library example must stay compiled", "## Use it", marker+" -->")
	}
	goVersion := goDirective(t, filepath.Join(root, "go.mod"))
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}

	for _, s := range snippets {
		t.Run(strings.TrimLeft(s.section, "# "), func(t *testing.T) {
			if !strings.HasPrefix(strings.TrimSpace(s.code), "package main") {
				t.Fatalf("README.md:%d: a marked block must be a complete program starting with \"package main\"", s.line)
			}
			dir := t.TempDir()
			goMod := "module readmecheck\n\ngo " + goVersion + "\n\n" +
				"require " + modulePath + " v0.0.0\n\n" +
				"replace " + modulePath + " => " + root + "\n"
			write(t, filepath.Join(dir, "go.mod"), goMod)
			write(t, filepath.Join(dir, "go.sum"), string(goSum))
			write(t, filepath.Join(dir, "main.go"), s.code)

			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
			defer cancel()
			// -mod=mod lets go add the snippet's other direct imports (such
			// as go-redis) at the versions this repository requires; every
			// module comes from the module cache, checked against go.sum.
			cmd := exec.CommandContext(ctx, gocmd, "vet", ".")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("README.md:%d (%s) does not compile: go vet: %v\n%s\nthe program, as main.go:\n%s",
					s.line, s.section, err, mainGoLines(out, s.line), s.code)
			}
		})
	}
}

// repoRoot finds the directory of this module's go.mod above the test's
// working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			regexp.MustCompile(`(?m)^module `+regexp.QuoteMeta(modulePath)+`\s*$`).Match(b) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod of %s above the test's directory", modulePath)
		}
		dir = parent
	}
}

// markedSnippets returns the ```go blocks of the Markdown file at path that
// directly follow a marker line.
func markedSnippets(t *testing.T, path string) []snippet {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out      []snippet
		section  string
		marked   bool // the previous line was a marker
		cur      *snippet
		code     strings.Builder
		inFence  bool // inside any fenced block
		lineNo   int
		scanner  = bufio.NewScanner(f)
		fenceTag = regexp.MustCompile("^```")
	)
	for scanner.Scan() {
		lineNo++
		line := scanner.Text()
		switch {
		case cur != nil && strings.TrimSpace(line) == "```":
			cur.code = code.String()
			out = append(out, *cur)
			cur, inFence = nil, false
			code.Reset()
		case cur != nil:
			code.WriteString(line + "\n")
		case inFence:
			if strings.TrimSpace(line) == "```" {
				inFence = false
			}
		case marked && strings.TrimSpace(line) == "```go":
			cur = &snippet{section: section, line: lineNo + 1}
			inFence = true
		case marked:
			t.Fatalf("%s:%d: the marker must be followed at once by a ```go line", path, lineNo)
		case fenceTag.MatchString(strings.TrimSpace(line)):
			inFence = true
		case strings.HasPrefix(line, "#"):
			section = line
		}
		marked = strings.HasPrefix(strings.TrimSpace(line), marker)
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s:%d: the marked Go block is not closed", path, cur.line)
	}
	return out
}

func hasSection(snippets []snippet, section string) bool {
	for _, s := range snippets {
		if s.section == section {
			return true
		}
	}
	return false
}

// goDirective returns the go version a go.mod file names.
func goDirective(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)\s*$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no go directive", path)
	}
	return string(m[1])
}

// mainGoLines rewrites main.go:N positions in go's output as README.md lines.
func mainGoLines(out []byte, first int) string {
	re := regexp.MustCompile(`\./main\.go:(\d+)`)
	return re.ReplaceAllStringFunc(string(out), func(m string) string {
		n, _ := strconv.Atoi(re.FindStringSubmatch(m)[1])
		return "README.md:" + strconv.Itoa(first+n-1)
	})
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

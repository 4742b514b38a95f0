package readmetest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maxREADMELines bounds README.md: it is the front page, and the
// references live in docs/.
const maxREADMELines = 250

// firstScreen is how many lines of README.md a reader sees first.
const firstScreen = 40

// TestREADMEIsAFrontPage: README.md stays short, says on its first screen
// what fresh servers without AOF do (the rejoin delay), and keeps the
// set-up commands that CI and newcomers rely on.
func TestREADMEIsAFrontPage(t *testing.T) {
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > maxREADMELines {
		t.Errorf("README.md has %d lines, over %d: move reference material to docs/", len(lines), maxREADMELines)
	}
	first := strings.Join(lines[:min(firstScreen, len(lines))], "\n")
	for _, want := range []string{"rejoin delay", "appendfsync"} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md: the first %d lines do not mention %q", firstScreen, want)
		}
	}
	for _, want := range []string{
		"go get github.com/e6344662/go-redlock/...",
		"go run ./examples/quickstart",
		"make test ", // the command .ci/run runs
		"docs/cli.md",
		"docs/library.md",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("README.md does not contain %q", want)
		}
	}
}

// TestDocLinksResolve: the relative links of README.md, CONTRIBUTING.md
// and docs/*.md point at files that exist, and their #anchors at headings
// of the file they name.
func TestDocLinksResolve(t *testing.T) {
	root := repoRoot(t)
	files := []string{"README.md", "CONTRIBUTING.md"}
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := filepath.Join(root, f) // a bare #anchor is in f itself
			if path != "" {
				file = filepath.Join(root, filepath.Dir(f), path)
			}
			info, err := os.Stat(file)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor == "" || info.IsDir() || !strings.HasSuffix(file, ".md") {
				continue
			}
			if !hasAnchor(t, file, anchor) {
				t.Errorf("%s links to %s: no heading of %s has the anchor #%s", f, target, filepath.Base(file), anchor)
			}
		}
	}
}

// hasAnchor reports whether a heading of the Markdown file makes anchor.
func hasAnchor(t *testing.T, file, anchor string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	inCode := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		if slug(strings.TrimSpace(strings.TrimLeft(l, "#"))) == anchor {
			return true
		}
	}
	return false
}

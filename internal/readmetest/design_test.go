package readmetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDesignReferencesResolve: every file that cites docs/design.md cites
// sections and anchors that exist, and nothing cites the design document
// under another name.
func TestDesignReferencesResolve(t *testing.T) {
	root := repoRoot(t)
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	sections := map[int]bool{}
	anchors := map[string]bool{}
	for i, m := range regexp.MustCompile(`(?m)^## (\d+)\. (.+)$`).FindAllStringSubmatch(string(design), -1) {
		n, _ := strconv.Atoi(m[1])
		if n != i+1 {
			t.Errorf("docs/design.md: section %q is numbered %d, want %d", m[2], n, i+1)
		}
		sections[n] = true
		anchors[slug(m[1]+". "+m[2])] = true
	}
	if len(sections) == 0 {
		t.Fatal("docs/design.md has no numbered sections (## N. Title)")
	}

	sectionRef := regexp.MustCompile(`§(\d+)`)
	anchorRef := regexp.MustCompile(`design\.md#([A-Za-z0-9_-]+)`)
	localAnchor := regexp.MustCompile(`\]\(#([A-Za-z0-9_-]+)\)`)
	cited := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "testdata" || rel == filepath.Join("internal", "readmetest") {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".lua":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(b)
		if strings.Contains(text, "DESIGN.md") {
			t.Errorf("%s cites DESIGN.md, which the repository does not have: cite docs/design.md §N", rel)
		}
		if rel != filepath.Join("docs", "design.md") && !strings.Contains(text, "docs/design.md") {
			return nil
		}
		cited++
		for _, m := range sectionRef.FindAllStringSubmatch(text, -1) {
			if n, _ := strconv.Atoi(m[1]); !sections[n] {
				t.Errorf("%s cites §%d; docs/design.md has sections 1 to %d", rel, n, len(sections))
			}
		}
		refs := anchorRef.FindAllStringSubmatch(text, -1)
		if rel == filepath.Join("docs", "design.md") {
			refs = append(refs, localAnchor.FindAllStringSubmatch(text, -1)...)
		}
		for _, m := range refs {
			if !anchors[m[1]] {
				t.Errorf("%s links to design.md#%s, which is not a section heading", rel, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited < 2 {
		t.Errorf("only %d files cite docs/design.md; the code comments and RELIABILITY.md should", cited)
	}
}

// slug makes a Markdown heading's anchor as GitHub does: lower case,
// punctuation dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

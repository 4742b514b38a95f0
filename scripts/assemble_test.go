package scripts

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestHelperFilesSplit: every helper file splits into units that cover
// all its code (what is left out is blank lines and comment blocks not
// directly above a unit), no two units share a name, and a unit names
// only units defined before it.
func TestHelperFilesSplit(t *testing.T) {
	units, err := splitHelpers(helperFiles()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range helperFiles() {
		var kept strings.Builder
		for _, u := range units {
			if u.file == f[0] {
				kept.WriteString(u.text)
			}
		}
		if got, want := codeLines(kept.String()), codeLines(f[1]); got != want {
			t.Errorf("%s: the units hold %d code lines, the file %d", f[0], got, want)
		}
	}
}

// codeLines counts the lines of src that are neither blank nor comments.
func codeLines(src string) int {
	n := 0
	for _, l := range strings.Split(src, "\n") {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "--") {
			n++
		}
	}
	return n
}

// TestSplitUnitsRefusesOtherShapes: a helper file whose top level is not
// made of units the splitter knows is an error, never a unit silently
// dropped or cut short.
func TestSplitUnitsRefusesOtherShapes(t *testing.T) {
	for name, src := range map[string]string{
		"statement":         "local a = 1\nprint(a)\n",
		"global function":   "function f()\n  return 1\nend\n",
		"no end":            "local function f()\n  return 1\n",
		"indented end only": "local function f()\n  return 1\n  end\n",
		"column-0 body":     "local function f()\nreturn 1\nend\n",
		"two names":         "local a, b = 1, 2\n",
		"multi-line table":  "local t = {\n  a = 1,\n}\n",
		"no newline":        "local a = 1",
		"block statement":   "if x then\n  y()\nend\n",
	} {
		if _, err := splitUnits(name+".lua", src); err == nil {
			t.Errorf("%s: split without an error", name)
		}
	}
	if _, err := splitHelpers([2]string{"a.lua", "local function f()\n  return g()\nend\n\nlocal function g()\n  return 1\nend\n"}); err == nil {
		t.Error("a unit naming a later one: no error")
	}
	if _, err := splitHelpers([2]string{"a.lua", "local x = 1\n"}, [2]string{"b.lua", "local x = 2\n"}); err == nil {
		t.Error("a name defined twice: no error")
	}
	u, err := splitUnits("ok.lua", "-- file header\n\n-- f's comment\n-- more\nlocal function f(a)\n  -- inside\n\n  return a -- g\nend\nlocal k = 'g' -- h\n")
	if err != nil || len(u) != 2 || u[0].name != "f" || u[1].name != "k" {
		t.Fatalf("split: %v %+v", err, u)
	}
	if !strings.HasPrefix(u[0].text, "-- f's comment\n-- more\nlocal function f(a)") || strings.Contains(u[0].text, "header") {
		t.Errorf("f's text: %q", u[0].text)
	}
	if u[0].uses["g"] || u[1].uses["g"] || u[1].uses["h"] || !u[0].uses["a"] {
		t.Errorf("names in comments or strings count as uses: %v %v", u[0].uses, u[1].uses)
	}
}

var (
	definesFunc  = regexp.MustCompile(`(?m)^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	definesConst = regexp.MustCompile(`(?m)^local ([A-Za-z_][A-Za-z0-9_]*) =`)
	luaWord      = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// helperNames is every name a helper file defines at its top level, read
// from the files on disk (not through the splitter).
func helperNames(t *testing.T) map[string]string {
	names := map[string]string{}
	for _, f := range []string{"lock.lua", "counter.lua", "trust.lua", "queue.lua", "rw.lua"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{definesFunc, definesConst} {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				names[m[1]] = f
			}
		}
	}
	return names
}

// TestScriptsDefineWhatTheyUseAndUseWhatTheyDefine: in every script of
// the package, (a) every helper it defines is named in its code (comments
// and strings left out) somewhere other than the line that defines it:
// nothing unused is sent; (b) every helper name its code names is defined
// in it, before its first use: nothing is missing. (Running every script,
// on miniredis and on redis-server, is the redlock and model/refnode
// packages' tests.)
func TestScriptsDefineWhatTheyUseAndUseWhatTheyDefine(t *testing.T) {
	names := helperNames(t)
	for _, s := range All {
		src := strings.TrimPrefix(s.src, keyCheck)
		code := luaCode(src)
		defined := map[string]int{} // helper name -> line it is defined on
		for i, l := range strings.Split(code, "\n") {
			for _, re := range []*regexp.Regexp{definesFunc, definesConst} {
				if m := re.FindStringSubmatch(l); m != nil && names[m[1]] != "" {
					if _, twice := defined[m[1]]; twice {
						t.Errorf("%s: %s defined twice", s.name, m[1])
					}
					defined[m[1]] = i
				}
			}
		}
		used := map[string]bool{}
		for i, l := range strings.Split(code, "\n") {
			for _, w := range luaWord.FindAllString(l, -1) {
				if names[w] == "" {
					continue
				}
				at, ok := defined[w]
				switch {
				case !ok:
					t.Errorf("%s: line %d names %s (%s), which it does not define", s.name, i+1, w, names[w])
				case i < at:
					t.Errorf("%s: line %d names %s before its definition (line %d)", s.name, i+1, w, at+1)
				case i > at:
					used[w] = true
				}
			}
		}
		for name := range defined {
			if !used[name] {
				t.Errorf("%s: defines %s (%s), which nothing in it uses", s.name, name, names[name])
			}
		}
		t.Logf("%-13s %4d lines, %2d helpers", s.name, strings.Count(src, "\n"), len(defined))
	}
}

// TestScriptHeaders: every script's own file opens with one comment block
// that states its KEYS, its ARGV and its replies, and names on a
// "Helpers:" line exactly the helper files whose units the script takes.
func TestScriptHeaders(t *testing.T) {
	files := map[string]string{
		"acquire": acquireSrc, "fence": fenceSrc, "renew": renewSrc, "release": releaseSrc,
		"leave": leaveSrc, "rehold": reholdSrc, "inspect": inspectSrc, "fenced_write": fencedWriteSrc,
		"acquire_all": acquireAllSrc, "rw_write": rwWriteSrc, "rw_read": rwReadSrc,
		"rw_withdraw": rwWithdrawSrc, "rw_inspect": rwInspectSrc,
	}
	helpersLine := regexp.MustCompile(`Helpers:\s*((?:none|[a-z_]+\.lua(?:,\s*[a-z_]+\.lua)*))\.`)
	for _, s := range All {
		src, ok := files[s.name]
		if !ok {
			t.Errorf("%s: no source file in this test's list", s.name)
			continue
		}
		var header []string
		for _, l := range strings.Split(src, "\n") {
			if !strings.HasPrefix(l, "--") {
				break
			}
			header = append(header, strings.TrimSpace(strings.TrimPrefix(l, "--")))
		}
		text := strings.Join(header, "\n")
		for _, want := range []string{"\nKEYS", "\nARGV", "\nRepl"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: its header has no line starting %q", s.name, strings.TrimSpace(want))
			}
		}
		m := helpersLine.FindStringSubmatch(strings.Join(header, " "))
		if m == nil {
			t.Errorf("%s: its header names no helper files (\"Helpers: a.lua, b.lua.\" or \"Helpers: none.\")", s.name)
			continue
		}
		var taken []string
		for _, u := range helpers {
			if strings.Contains(s.src, u.text) && (len(taken) == 0 || taken[len(taken)-1] != u.file) {
				taken = append(taken, u.file)
			}
		}
		named := "none"
		if len(taken) > 0 {
			named = strings.Join(taken, ", ")
		}
		if got := regexp.MustCompile(`\s+`).ReplaceAllString(m[1], " "); got != named {
			t.Errorf("%s: its header says Helpers: %s; it takes units of %s", s.name, got, named)
		}
	}
}

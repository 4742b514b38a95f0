package scripts

import (
	"fmt"
	"regexp"
	"strings"
)

// A unit is one top-level definition of a helper file: a "local function
// name(...)" block through its "end" at column 0, or a one-line "local
// name = ..." constant, with the comment lines directly above it.
type unit struct {
	file string          // the helper file it comes from, such as "counter.lua"
	name string          // the name it defines
	text string          // its lines, comments above included, each ending in "\n"
	uses map[string]bool // the identifiers its code names (comments and strings left out)
}

var (
	unitFunc  = regexp.MustCompile(`^local function ([A-Za-z_][A-Za-z0-9_]*)\(`)
	unitConst = regexp.MustCompile(`^local ([A-Za-z_][A-Za-z0-9_]*) = \S`)
	luaIdent  = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// splitUnits splits helper file src (named file) into its top-level units,
// in order. Every line must be blank, a comment at column 0, or part of a
// unit; a function's body lines are indented or blank, and it ends at a
// line "end". Anything else is an error: the file does not have the shape
// the assembly relies on.
func splitUnits(file, src string) ([]unit, error) {
	if !strings.HasSuffix(src, "\n") {
		return nil, fmt.Errorf("%s: does not end in a newline", file)
	}
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	var units []unit
	var comments []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case line == "":
			comments = nil
		case strings.HasPrefix(line, "--"):
			comments = append(comments, line)
		case unitFunc.MatchString(line):
			name := unitFunc.FindStringSubmatch(line)[1]
			start := i
			for i++; i < len(lines) && lines[i] != "end"; i++ {
				if l := lines[i]; l != "" && l[0] != ' ' && l[0] != '\t' {
					return nil, fmt.Errorf("%s:%d: function %s: line at column 0 before its \"end\": %q", file, i+1, name, l)
				}
			}
			if i == len(lines) {
				return nil, fmt.Errorf("%s:%d: function %s has no \"end\" at column 0", file, start+1, name)
			}
			units = append(units, newUnit(file, name, comments, lines[start:i+1]))
			comments = nil
		case unitConst.MatchString(line):
			name := unitConst.FindStringSubmatch(line)[1]
			units = append(units, newUnit(file, name, comments, lines[i:i+1]))
			comments = nil
		default:
			return nil, fmt.Errorf("%s:%d: not a blank line, a comment, \"local function\" or a one-line \"local\": %q", file, i+1, line)
		}
	}
	return units, nil
}

func newUnit(file, name string, comments, code []string) unit {
	text := strings.Join(append(append([]string(nil), comments...), code...), "\n") + "\n"
	return unit{file: file, name: name, text: text, uses: identifiers(strings.Join(code, "\n"))}
}

// luaCode is Lua source src with its comments and the contents of its
// quoted strings blanked (one line at a time: these files have no long
// strings or long comments).
func luaCode(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		var quote byte
		for i := 0; i < len(line); i++ {
			c := line[i]
			switch {
			case quote != 0 && c == '\\':
				i++
			case quote != 0 && c == quote:
				quote = 0
				b.WriteByte(c)
			case quote != 0:
			case c == '\'' || c == '"':
				quote = c
				b.WriteByte(c)
			case c == '-' && i+1 < len(line) && line[i+1] == '-':
				i = len(line)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// identifiers is the set of identifiers (whole words) that Lua source src
// names outside comments and strings.
func identifiers(src string) map[string]bool {
	ids := map[string]bool{}
	for _, id := range luaIdent.FindAllString(luaCode(src), -1) {
		ids[id] = true
	}
	return ids
}

// splitHelpers splits every helper file, in the order given (the order
// the units are defined in a script), and checks that no two units share
// a name and that a unit names only units defined before it (a Lua local
// is visible only after its definition).
func splitHelpers(files ...[2]string) ([]unit, error) {
	var all []unit
	index := map[string]int{}
	for _, f := range files {
		units, err := splitUnits(f[0], f[1])
		if err != nil {
			return nil, err
		}
		for _, u := range units {
			if j, dup := index[u.name]; dup {
				return nil, fmt.Errorf("%s: %s is defined in %s too", u.file, u.name, all[j].file)
			}
			index[u.name] = len(all)
			all = append(all, u)
		}
	}
	for i, u := range all {
		for id := range u.uses {
			if j, ok := index[id]; ok && j > i {
				return nil, fmt.Errorf("%s: %s names %s, which is defined after it (%s)", u.file, u.name, id, all[j].file)
			}
		}
	}
	return all, nil
}

// assemble is body with, in front of it, the units of helpers it needs:
// those its code names, and those they name, transitively, in the
// helpers' order; each helper file's units under a line naming the file.
func assemble(helpers []unit, body string) string {
	need := identifiers(body)
	for i := len(helpers) - 1; i >= 0; i-- { // a unit names only earlier ones
		if need[helpers[i].name] {
			for id := range helpers[i].uses {
				need[id] = true
			}
		}
	}
	var b strings.Builder
	file := ""
	for _, u := range helpers {
		if !need[u.name] {
			continue
		}
		if u.file != file {
			file = u.file
			fmt.Fprintf(&b, "-- from %s:\n", file)
		} else {
			b.WriteString("\n")
		}
		b.WriteString(u.text)
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String() + body
}

package layering

import (
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The rule this test enforces: every package's doc comment contains one
// sentence of the form
//
//	It may import graph, window, mtime, github.com/cespare/xxhash/v2 and the standard library.
//
// listing the module's packages by their path inside the module ("weir" for
// the SDK root package), other modules by their module path, and "the
// standard library" when it is allowed. Text in parentheses is commentary.
// The package's imports (of its non-test files, under every build tag) must
// be in the list, and every package of the module the list names must be
// imported, so the sentence stays true in both directions. A sentence
// "It must not import X and Y" forbids X and Y even indirectly.

const module = "github.com/weir-dev/weir"

// pkg is one package of the module as its files declare it.
type pkg struct {
	rel     string          // path inside the module; "weir" for the root
	doc     string          // the package doc comment, joined over files
	imports map[string]bool // import paths of non-test files
}

func TestPackageDocsSayWhatTheyImport(t *testing.T) {
	pkgs := loadModule(t)
	for _, rel := range sortedKeys(pkgs) {
		p := pkgs[rel]
		t.Run(rel, func(t *testing.T) {
			allowed, err := clause(p.doc, "may import")
			if err != nil {
				t.Fatalf("package %s: %v", rel, err)
			}
			rules := parseAllowed(allowed)
			for _, imp := range sortedKeys(p.imports) {
				if !rules.allows(imp) {
					t.Errorf("package %s imports %q, which its doc's \"may import\" sentence does not list (%q)", rel, imp, allowed)
				}
			}
			for _, inner := range rules.inner {
				if _, ok := pkgs[inner]; !ok {
					t.Errorf("package %s: its doc lists %q, which is no package of the module", rel, inner)
					continue
				}
				if !p.imports[importPath(inner)] {
					t.Errorf("package %s: its doc lists %q as an import, but the package does not import it", rel, inner)
				}
			}
			forbidden, err := clause(p.doc, "must not import")
			if errors.Is(err, errNoClause) {
				return
			}
			if err != nil {
				t.Fatalf("package %s: %v", rel, err)
			}
			deps := transitive(pkgs, rel)
			for _, f := range parseAllowed(forbidden).inner {
				if path, ok := deps[f]; ok {
					t.Errorf("package %s must not import %s, but does through %s", rel, f, path)
				}
			}
		})
	}
}

// TestBelowTheRunner pins the layering of docs/ARCHITECTURE.md ("Layers") that the docs alone
// do not: the packages below the executor never reach it, not even through
// another package.
func TestBelowTheRunner(t *testing.T) {
	pkgs := loadModule(t)
	below := []string{"mtime", "window", "graph", "row", "state", "runner/contract", "io/files", "io/jdbc", "io/pubsub", "io/sqlsink"}
	for _, rel := range below {
		if _, ok := pkgs[rel]; !ok {
			t.Errorf("package %s is missing", rel)
			continue
		}
		deps := transitive(pkgs, rel)
		for _, top := range []string{"runner", "service", "api", "server", "yamlpipe", "weirx", "cmd/weir"} {
			if path, ok := deps[top]; ok {
				t.Errorf("package %s depends on %s through %s; it sits below it", rel, top, path)
			}
		}
	}
}

var errNoClause = errors.New("no such sentence")

// clause returns the list that follows verb ("may import") in doc, up to
// the end of its sentence.
func clause(doc, verb string) (string, error) {
	doc = strings.Join(strings.Fields(doc), " ")
	i := strings.Index(doc, verb+" ")
	if i < 0 {
		return "", fmt.Errorf("%w: its doc has no sentence %q (write \"It %s ... and the standard library.\")", errNoClause, verb+" ...", verb)
	}
	rest := doc[i+len(verb)+1:]
	end := len(rest)
	for j := 0; j < len(rest); j++ {
		if rest[j] == ';' || rest[j] == '.' && (j+1 == len(rest) || rest[j+1] == ' ') {
			end = j
			break
		}
	}
	return rest[:end], nil
}

// rules is a parsed "may import" list.
type rules struct {
	std    bool
	inner  []string // module packages, by path inside the module
	others []string // other modules, by module path
}

func parseAllowed(list string) rules {
	var r rules
	// Drop commentary in parentheses.
	var b strings.Builder
	depth := 0
	for _, c := range list {
		switch {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth == 0:
			b.WriteRune(c)
		}
	}
	text := strings.ReplaceAll(b.String(), " and ", ",")
	for _, item := range strings.Split(text, ",") {
		item = strings.TrimSpace(item)
		item = strings.TrimPrefix(item, "only ")
		item = strings.TrimPrefix(item, "the ")
		switch {
		case item == "":
		case item == "standard library":
			r.std = true
		case strings.Contains(strings.SplitN(item, "/", 2)[0], "."):
			r.others = append(r.others, item)
		default:
			r.inner = append(r.inner, item)
		}
	}
	return r
}

func (r rules) allows(imp string) bool {
	if rel, ok := relOf(imp); ok {
		for _, in := range r.inner {
			if in == rel {
				return true
			}
		}
		return false
	}
	if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
		return r.std
	}
	for _, o := range r.others {
		if imp == o || strings.HasPrefix(imp, o+"/") {
			return true
		}
	}
	return false
}

func relOf(imp string) (string, bool) {
	if imp == module {
		return "weir", true
	}
	if strings.HasPrefix(imp, module+"/") {
		return strings.TrimPrefix(imp, module+"/"), true
	}
	return "", false
}

func importPath(rel string) string {
	if rel == "weir" {
		return module
	}
	return module + "/" + rel
}

// transitive returns every module package rel depends on, each with one
// import chain that reaches it.
func transitive(pkgs map[string]*pkg, rel string) map[string]string {
	seen := map[string]string{}
	var visit func(string, string)
	visit = func(cur, chain string) {
		for _, imp := range sortedKeys(pkgs[cur].imports) {
			dep, ok := relOf(imp)
			if !ok || pkgs[dep] == nil {
				continue
			}
			if _, done := seen[dep]; done {
				continue
			}
			seen[dep] = chain + " -> " + dep
			visit(dep, chain+" -> "+dep)
		}
	}
	visit(rel, rel)
	return seen
}

func loadModule(t *testing.T) map[string]*pkg {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return fmt.Errorf("parsing %s: %w", path, err)
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		rel := filepath.ToSlash(dir)
		if rel == "." {
			rel = "weir"
		}
		p := pkgs[rel]
		if p == nil {
			p = &pkg{rel: rel, imports: map[string]bool{}}
			pkgs[rel] = p
		}
		if f.Doc != nil {
			p.doc += f.Doc.Text() + "\n"
		}
		for _, s := range f.Imports {
			imp, err := strconv.Unquote(s.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: import %s: %w", path, s.Path.Value, err)
			}
			p.imports[imp] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 10 {
		t.Fatalf("found only %d packages under %s", len(pkgs), root)
	}
	return pkgs
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module "+module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the test's directory", module)
		}
		dir = parent
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// TestReadmeLayoutTable checks the README's "## Layout" table: a row for
// every package (examples aside), whose last column lists exactly the
// module packages the package imports.
func TestReadmeLayoutTable(t *testing.T) {
	pkgs := loadModule(t)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "\n## Layout\n")
	if i < 0 {
		t.Fatal("README.md has no \"## Layout\" section")
	}
	rows := map[string]string{}
	for _, line := range strings.Split(text[i:], "\n")[2:] {
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		name := strings.TrimSpace(cells[0])
		name = strings.TrimSpace(strings.TrimSuffix(name, "(root)"))
		name = strings.Trim(name, "`")
		rows[name] = strings.TrimSpace(cells[len(cells)-1])
	}
	for _, rel := range sortedKeys(pkgs) {
		if strings.HasPrefix(rel, "examples/") {
			continue
		}
		col, ok := rows[rel]
		if !ok {
			t.Errorf("README.md's layout table has no row for package %s", rel)
			continue
		}
		var want []string
		for _, imp := range sortedKeys(pkgs[rel].imports) {
			if dep, ok := relOf(imp); ok {
				want = append(want, dep)
			}
		}
		sort.Strings(want)
		for i := range want {
			want[i] = "`" + want[i] + "`"
		}
		wantCol := strings.Join(want, ", ")
		if wantCol == "" {
			wantCol = "—"
		}
		if col != wantCol {
			t.Errorf("README.md's layout row for %s lists %q as its imports; the package imports %q", rel, col, wantCol)
		}
	}
	for name := range rows {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("README.md's layout table has a row for %s, which is no package of the module", name)
		}
	}
}

// TestNoReferenceOutside: the repository stands on its own: no file names a
// map or document kept outside it (docs/ARCHITECTURE.md is the map).
func TestNoReferenceOutside(t *testing.T) {
	root := filepath.Join("..", "..")
	outside := []string{"DESIGN" + ".md", "../" + "shared/", "shared/" + "STYLE"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "weir-data", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".yml", ".txt", ".js", ".html", ".css", ".json", "":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, o := range outside {
			if strings.Contains(string(b), o) {
				t.Errorf("%s refers to %q, outside the repository: point to docs/ARCHITECTURE.md instead", path, o)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

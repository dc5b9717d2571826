package node

import (
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// layers puts each file of the package in its layer (doc.go): a file uses only names declared
// in its own layer and those below, never one above.
var layers = map[string]int{
	"doc.go": 0,
	// config
	"config.go": 1, "fakewa.go": 1, "release.go": 1, "gc.go": 1,
	// storage and network
	"storage.go": 2, "network.go": 2, "events.go": 2,
	// the runtime: the engine and its events
	"runtime.go": 3,
	// a cluster node's partitions
	"cluster.go": 4, "mover.go": 4, "directory.go": 4, "live.go": 4, "lists.go": 4,
	// the node
	"node.go": 5,
}

// upArrows lists, for the package's files in dir (with the build tags given), each use of a
// name declared in a file of a higher layer, and each file no layer holds.
func upArrows(t *testing.T, dir string, tags ...string) []string {
	t.Helper()
	ctx := build.Default
	ctx.BuildTags = tags
	pkg, err := ctx.ImportDir(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	var bad []string
	for _, name := range pkg.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		if _, ok := layers[name]; !ok {
			bad = append(bad, name+": in no layer (add it to layers and to doc.go)")
		}
	}
	// The package's own names are all that matter: imports are left empty (their uses do
	// not resolve, and those errors are ignored).
	conf := types.Config{
		Importer: importerFunc(func(p string) (*types.Package, error) {
			pk := types.NewPackage(p, path.Base(p))
			pk.MarkComplete()
			return pk, nil
		}),
		Error: func(error) {},
	}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	_, _ = conf.Check(pkg.ImportPath, fset, files, info)
	arrow := func(use token.Pos, obj types.Object) {
		if obj == nil || !obj.Pos().IsValid() {
			return
		}
		from, to := filepath.Base(fset.Position(use).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		lf, okf := layers[from]
		lt, okt := layers[to]
		if okf && okt && lt > lf {
			bad = append(bad, fset.Position(use).String()+": "+from+" uses "+obj.Name()+" of "+to)
		}
	}
	for id, obj := range info.Uses {
		arrow(id.Pos(), obj)
	}
	for sel, s := range info.Selections {
		arrow(sel.Sel.Pos(), s.Obj())
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// The files stand in layers: config → storage and network → runtime → cluster → node.
func TestFilesStandInLayers(t *testing.T) {
	for _, tags := range [][]string{nil, {"fakewa"}} {
		if bad := upArrows(t, ".", tags...); len(bad) > 0 {
			t.Errorf("tags %v: names used from a higher layer (doc.go, layers_test.go):\n%s", tags, strings.Join(bad, "\n"))
		}
	}
}

// The check fails on an arrow back up: a lower file that uses a name of a higher one.
func TestLayersCatchAnArrowBackUp(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := writeFile(filepath.Join(dir, name), "package node\n\n"+src); err != nil {
			t.Fatal(err)
		}
	}
	write("config.go", "type Config struct{}\n\nfunc (Config) check() error { return (&clusterNode{}).health() }\n")
	write("cluster.go", "type clusterNode struct{}\n\nfunc (*clusterNode) health() error { return nil }\n\nvar _ = Config{}\n")
	write("stray.go", "var stray = 1\n")
	bad := upArrows(t, dir)
	want := []string{"config.go uses clusterNode of cluster.go", "config.go uses health of cluster.go", "stray.go: in no layer"}
	for _, w := range want {
		if !slices.ContainsFunc(bad, func(b string) bool { return strings.Contains(b, w) }) {
			t.Errorf("not found: %q in %q", w, bad)
		}
	}
	if len(bad) != len(want) {
		t.Errorf("found %d, want %d: %q", len(bad), len(want), bad)
	}
}

func writeFile(name, data string) error { return os.WriteFile(name, []byte(data), 0o644) }

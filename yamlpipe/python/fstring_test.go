package python

import (
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// TestFStrings: the f-strings str.format can express become str.format
// calls that evaluate to what Python's f-string gives; the others are
// left as they are (pyUnsupported names them).
func TestFStrings(t *testing.T) {
	env := starlark.StringDict{"name": starlark.String("kiwi"), "n": starlark.MakeInt(3), "d": starlark.NewDict(1)}
	_ = env["d"].(*starlark.Dict).SetKey(starlark.String("k"), starlark.MakeInt(7))
	for _, tc := range []struct {
		src, want string // want: the value, or "" when left as it is
	}{
		{`f'{name}!'`, `kiwi!`},
		{`f"{name} has {n} items"`, `kiwi has 3 items`},
		{`f'{n + 1}/{n * 2}'`, `4/6`},
		{`f'{name!r}'`, `"kiwi"`},
		{`f'{{literal}} {n}'`, `{literal} 3`},
		{`f'{d["k"]}'`, `7`},
		{`f'{[x for x in [1, 2]]}'`, `[1, 2]`},
		{`f'{n == 3} {n != 3} {n <= 3}'`, `True False True`},
		{`f'plain'`, `plain`},
		{`F'{name}'`, `kiwi`},
		{`"f'{name}'"`, `f'{name}'`}, // inside a string: not an f-string
		{`f'{n:.2f}'`, ``},
		{`f'{n=}'`, ``},
		{`f'{name['x']}'`, ``},
		{`rf'{name}'`, ``},
		{`f'{name'`, ``},
	} {
		t.Run(tc.src, func(t *testing.T) {
			got := pyFStrings(tc.src)
			if tc.want == "" {
				if got != tc.src {
					t.Fatalf("rewrote %s into %s, want it left", tc.src, got)
				}
				return
			}
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, &starlark.Thread{}, "f.py", got, env)
			if err != nil {
				t.Fatalf("%s → %s: %v", tc.src, got, err)
			}
			s, ok := starlark.AsString(v)
			if !ok {
				s = v.String()
			}
			if s != tc.want {
				t.Errorf("%s → %s = %q, want %q", tc.src, got, s, tc.want)
			}
		})
	}
}

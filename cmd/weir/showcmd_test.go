package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestTextHelpers checks the text the shared printers make: a table, a
// resource's fields and a benchmark's targets.
func TestTextHelpers(t *testing.T) {
	tests := []struct {
		name  string
		write func(b *strings.Builder) error
		want  string
	}{
		{
			name: "table",
			write: func(b *strings.Builder) error {
				return writeTable(b, "NAME\tN", []int{1, 22}, func(n int) string { return fmt.Sprintf("item-%d\t%d", n, n) })
			},
			want: "NAME     N\nitem-1   1\nitem-22  22\n",
		},
		{
			name: "empty table",
			write: func(b *strings.Builder) error {
				return writeTable(b, "NAME\tN", []int(nil), func(n int) string { return "" })
			},
			want: "NAME  N\n",
		},
		{
			name: "fields",
			write: func(b *strings.Builder) error {
				return writeFields(b, func(row func(k, v string)) {
					row("Name", "t")
					row("Create time", "now")
				})
			},
			want: "Name:         t\nCreate time:  now\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

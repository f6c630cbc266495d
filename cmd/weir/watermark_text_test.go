package main

import "testing"

func TestWatermarkText(t *testing.T) {
	age := func(s float64) *float64 { return &s }
	for _, tc := range []struct {
		wm   string
		age  *float64
		want string
	}{
		{"2026-12-06T05:28:06.000Z", age(14.2), "2026-12-06T05:28:06.000Z (age 14.2s)"},
		{"2026-12-06T05:28:06.000Z", age(-184.414), "2026-12-06T05:28:06.000Z (3m4.414s ahead of now)"},
		{"2026-12-06T05:28:06.000Z", nil, "2026-12-06T05:28:06.000Z"},
		{"", age(3), ""},
	} {
		if got := watermarkText(tc.wm, tc.age); got != tc.want {
			t.Errorf("watermarkText(%q, %v) = %q, want %q", tc.wm, tc.age, got, tc.want)
		}
	}
}

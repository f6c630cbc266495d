package pubsubgrpc

import "testing"

// TestFilter: Pub/Sub's filter syntax on attributes, and a message naming
// the problem for a filter it cannot parse.
func TestFilter(t *testing.T) {
	attrs := map[string]string{"color": "red", "size": "large", "region": "eu-west-1"}
	for _, tt := range []struct {
		src     string
		want    bool
		invalid bool
	}{
		{src: `attributes.color = "red"`, want: true},
		{src: `attributes.color = "blue"`},
		{src: `attributes.color != "blue"`, want: true},
		{src: `attributes.missing != "x"`, want: true},
		{src: `attributes:size`, want: true},
		{src: `attributes:weight`},
		{src: `NOT attributes:weight`, want: true},
		{src: `-attributes:weight`, want: true},
		{src: `hasPrefix(attributes.region, "eu-")`, want: true},
		{src: `hasPrefix(attributes.region, "us-")`},
		{src: `attributes.color = "red" AND attributes:size AND NOT attributes:weight`, want: true},
		{src: `attributes.color = "blue" OR attributes.size = "large"`, want: true},
		{src: `(attributes.color = "blue" OR attributes.size = "large") AND hasPrefix(attributes.region, "eu")`, want: true},
		{src: `attributes."color" = "red"`, want: true},
		{src: `attributes.color = "r\"ed"`},
		{src: `attributes.color = "red" AND attributes:size OR attributes:x`, invalid: true},
		{src: `attributes.color == "red"`, invalid: true},
		{src: `attributes.color = red`, invalid: true},
		{src: `color = "red"`, invalid: true},
		{src: `hasPrefix(attributes.color "r")`, invalid: true},
		{src: `(attributes:color`, invalid: true},
		{src: `attributes.color = "red" extra`, invalid: true},
	} {
		f, err := parseFilter(tt.src)
		if tt.invalid {
			if err == nil {
				t.Errorf("%s: parsed, want an error", tt.src)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.src, err)
			continue
		}
		if got := f.match(attrs); got != tt.want {
			t.Errorf("%s: match %v, want %v", tt.src, got, tt.want)
		}
	}
}

package pubsub

import (
	"fmt"
	"testing"
	"time"
)

// TestDedupeAcrossResume: a source de-duplicating by ID (attribute or
// field) keeps dropping republished IDs across a resume, whether it takes
// the IDs over in memory from the source it replaces (an in-place update:
// AdoptSource) or reads them back from the topic (a restart); the handover
// reads nothing back. A resume from another position than the one the old split
// stopped at does not use the handed-over IDs (they may cover messages
// past it).
func TestDedupeAcrossResume(t *testing.T) {
	for _, tt := range []struct {
		name        string
		byField     bool
		adopt       bool
		earlierPos  bool // resume from a position before the old split's last
		wantResumes int64
		want        string
	}{
		{name: "restart by attribute", wantResumes: 1, want: "[5]"},
		{name: "restart by field", byField: true, wantResumes: 1, want: "[5]"},
		{name: "handover by attribute", adopt: true, want: "[5]"},
		{name: "handover by field", byField: true, adopt: true, want: "[5]"},
		{name: "handover to an earlier position", byField: true, adopt: true, earlierPos: true, wantResumes: 1, want: "[2 5]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newTestBroker(t)
			ctx := tctx(t)
			setupTopic(t, b, "dup", "dup", time.Hour)
			pub := func(amount int, id string) {
				data := fmt.Sprintf(`{"region":"N","amount":%d,"id":%q}`, amount, id)
				if _, err := b.Publish(ctx, "dup", []byte(data), map[string]string{"key": id}, ""); err != nil {
					t.Fatal(err)
				}
			}
			cfg := SourceConfig{Subscription: "dup", Schema: orderSchema, IDAttribute: "key"}
			if tt.byField {
				cfg.IDAttribute, cfg.IDField = "", "id"
			}
			src, _ := NewSource(b, cfg)
			sp := openSplit(t, src)
			pub(1, "a")
			got, _ := readIdle(t, ctx, sp)
			pos1, _ := sp.Position() // after "a"
			pub(2, "b")
			pub(3, "a") // republished
			got2, _ := readIdle(t, ctx, sp)
			if fmt.Sprint(amounts(append(got, got2...))) != "[1 2]" {
				t.Fatalf("first run: %v", amounts(append(got, got2...)))
			}
			pos, _ := sp.Position() // covers all three
			if err := sp.Close(); err != nil {
				t.Fatal(err)
			}
			pub(4, "b") // republished after the checkpoint
			pub(5, "c")
			src2, _ := NewSource(b, cfg)
			if tt.adopt {
				src2.AdoptSource(src)
			}
			from := pos
			if tt.earlierPos {
				from = pos1
			}
			sps, err := src2.Resume(ctx, [][]byte{from})
			if err != nil {
				t.Fatal(err)
			}
			defer sps[0].Close()
			got, _ = readIdle(t, ctx, sps[0])
			if fmt.Sprint(amounts(got)) != tt.want {
				t.Fatalf("after resume: %v, want %s", amounts(got), tt.want)
			}
			rb := src2.ReadBack()
			if rb.Resumes != tt.wantResumes {
				t.Errorf("%d resumes read IDs back, want %d", rb.Resumes, tt.wantResumes)
			}
			if tt.wantResumes > 0 && (rb.Fetches == 0 || rb.Messages == 0) {
				t.Errorf("the restart read nothing back: %+v", rb)
			}
		})
	}
}

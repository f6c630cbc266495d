package pubsub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/row"
)

// TestSourceRecoversLostDelivery: a message the broker delivered to the
// subscription that never reached the split (here a pull request of
// someone else's takes it, as a pull the client gave up on while the
// broker still answered it does on a loaded machine) is read in its place,
// in order: the split sees its delivery sequence skip and rewinds the
// subscription to its acknowledgement floor instead of reading on and
// later dropping the message's redelivery as one of what it emitted.
func TestSourceRecoversLostDelivery(t *testing.T) {
	b := newTestBroker(t)
	ctx := tctx(t)
	if _, err := b.CreateTopic(ctx, "events", TopicConfig{}); err != nil {
		t.Fatal(err)
	}
	sub := SubscriptionName("job", "Read")
	src, err := NewSource(b, SourceConfig{Step: "Read", Topic: "events", Subscription: sub, Format: FormatRaw})
	if err != nil {
		t.Fatal(err)
	}
	sp := openSplit(t, src)
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := b.Publish(ctx, "events", []byte(fmt.Sprintf("m%d", i)), nil, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	data := func(got []any) string {
		var out []string
		for _, v := range got {
			d, _ := v.(*row.Row).Get("data")
			out = append(out, fmt.Sprint(d))
		}
		return strings.Join(out, " ")
	}
	var got []any
	publish(0, 3)
	for _, e := range readN(t, ctx, sp, 3, 8) {
		got = append(got, e.Value)
	}
	readIdle(t, ctx, sp) // no pull request of the split's is in flight now
	publish(3, 4)
	stream, _, _ := topicNames("events")
	m, err := b.nc.Request(fmt.Sprintf("$JS.API.CONSUMER.MSG.NEXT.%s.%s", stream, NATSName(sub)), []byte(`{"batch":1,"expires":2000000000}`), 5*time.Second)
	if err != nil || string(m.Data) != "m3" {
		t.Fatalf("taking the delivery of m3: %v %q", err, m.Data)
	}
	publish(4, 10)
	for _, e := range readN(t, ctx, sp, 7, 8) {
		got = append(got, e.Value)
	}
	if d := data(got); d != "m0 m1 m2 m3 m4 m5 m6 m7 m8 m9" {
		t.Errorf("the split read %s", d)
	}
	if s := sp.(*split); s.lostDeliveries != 1 {
		t.Errorf("%d rewinds after a lost delivery, want 1", s.lostDeliveries)
	}
}

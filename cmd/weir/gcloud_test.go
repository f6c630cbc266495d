package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in        string
		kind      string
		labels    []string
		noHeading bool
		wantErr   string
	}{
		{in: "text", kind: formatText},
		{in: "json", kind: formatJSON},
		{in: "yaml", kind: formatYAML},
		{in: "table(name, topic)", kind: formatTable, labels: []string{"NAME", "TOPIC"}},
		{in: "table(name,ack_wait:label=DEADLINE)", kind: formatTable, labels: []string{"NAME", "DEADLINE"}},
		{in: "table[no-heading](name)", kind: formatTable, labels: []string{"NAME"}, noHeading: true},
		{in: "value(name,labels.env)", kind: formatValue, labels: []string{"name", "labels.env"}},
		{in: "csv(name,backlog)", kind: formatCSV, labels: []string{"name", "backlog"}},
		{in: "xml", wantErr: "want text, json, yaml"},
		{in: "table", wantErr: "want table(KEY,...)"},
		{in: "table()", wantErr: "name at least one key"},
		{in: "table[box](name)", wantErr: `unknown format attribute "box"`},
		{in: "table(name.basename())", wantErr: "no projection transforms"},
		{in: "table(name:sort=1)", wantErr: `unknown key attribute "sort"`},
		{in: "csv[no-heading(name)", wantErr: "'[' without ']'"},
	} {
		f, err := parseFormat(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseFormat(%q) = %v, want an error with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseFormat(%q): %v", tc.in, err)
			continue
		}
		var labels []string
		for _, c := range f.cols {
			labels = append(labels, c.label)
		}
		if f.kind != tc.kind || strings.Join(labels, ",") != strings.Join(tc.labels, ",") || f.noHeading != tc.noHeading {
			t.Errorf("parseFormat(%q) = %s %v no-heading=%v, want %s %v %v", tc.in, f.kind, labels, f.noHeading, tc.kind, tc.labels, tc.noHeading)
		}
	}
}

// subs are three subscriptions as the API lists them.
var subs = []map[string]any{
	{"name": "orders-job", "topic": "orders", "backlog": 12, "ack_wait": "1m0s", "labels": map[string]any{"env": "prod"}},
	{"name": "orders-peek", "topic": "orders", "backlog": 0, "ack_wait": "10s"},
	{"name": "clicks", "topic": "clicks", "backlog": 3, "ack_wait": "10s", "labels": map[string]any{"env": "dev"}, "tags": []any{"a", "b"}},
}

func TestFormatWrite(t *testing.T) {
	for _, tc := range []struct {
		format string
		v      any
		want   string
	}{
		{"table(name,backlog,labels.env:label=ENV)", subs, "NAME         BACKLOG  ENV\norders-job   12       prod\norders-peek  0\nclicks       3        dev\n"},
		{"table[no-heading](name)", subs[:1], "orders-job\n"},
		{"value(name,ackWait)", subs, "orders-job\t1m0s\norders-peek\t10s\nclicks\t10s\n"},
		{"value(tags,labels)", subs[2], "a;b\tenv=dev\n"},
		{"csv(name,topic)", subs[:2], "name,topic\norders-job,orders\norders-peek,orders\n"},
		{"csv[no-heading](name,tags.1)", subs[2:], "clicks,b\n"},
		{"yaml", map[string]any{"name": "x", "backlog": 2}, "backlog: 2\nname: x\n"},
	} {
		f, err := parseFormat(tc.format)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := f.write(&b, tc.v, nil); err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		if b.String() != tc.want {
			t.Errorf("--format %s printed\n%q\nwant\n%q", tc.format, b.String(), tc.want)
		}
	}
}

func TestListOptions(t *testing.T) {
	g, err := toGeneric(subs)
	if err != nil {
		t.Fatal(err)
	}
	rows := g.([]any)
	for _, tc := range []struct {
		o       listOptions
		want    string // names kept, in order
		wantErr string
	}{
		{o: listOptions{}, want: "orders-job,orders-peek,clicks"},
		{o: listOptions{filter: "topic=orders"}, want: "orders-job,orders-peek"},
		{o: listOptions{filter: "topic = orders"}, want: "orders-job,orders-peek"},
		{o: listOptions{filter: "topic!=orders"}, want: "clicks"},
		{o: listOptions{filter: "name:PEEK"}, want: "orders-peek"},
		{o: listOptions{filter: "name=orders-*"}, want: "orders-job,orders-peek"},
		{o: listOptions{filter: "backlog>2"}, want: "orders-job,clicks"},
		{o: listOptions{filter: "backlog>=3 AND topic=orders"}, want: "orders-job"},
		{o: listOptions{filter: "backlog>=3 topic=orders"}, want: "orders-job"},
		{o: listOptions{filter: "topic=clicks OR backlog=0"}, want: "orders-peek,clicks"},
		{o: listOptions{filter: "NOT topic=orders"}, want: "clicks"},
		{o: listOptions{filter: "-topic=orders"}, want: "clicks"},
		{o: listOptions{filter: "labels:*"}, want: "orders-job,clicks"},
		{o: listOptions{filter: "NOT labels.env:*"}, want: "orders-peek"},
		{o: listOptions{filter: "labels.env=prod"}, want: "orders-job"},
		{o: listOptions{filter: "tags:b"}, want: "clicks"},
		{o: listOptions{filter: `name~"^orders-(job|x)$"`}, want: "orders-job"},
		{o: listOptions{filter: "name!~orders"}, want: "clicks"},
		{o: listOptions{filter: "(topic=clicks OR backlog>10) AND NOT name:job"}, want: "clicks"},
		{o: listOptions{filter: "ackWait=10s"}, want: "orders-peek,clicks"},
		{o: listOptions{sortBy: []string{"backlog"}}, want: "orders-peek,clicks,orders-job"},
		{o: listOptions{sortBy: []string{"~backlog"}}, want: "orders-job,clicks,orders-peek"},
		{o: listOptions{sortBy: []string{"topic", "~name"}}, want: "clicks,orders-peek,orders-job"},
		{o: listOptions{sortBy: []string{"name"}, limit: 2}, want: "clicks,orders-job"},
		{o: listOptions{filter: "topic=orders", sortBy: []string{"backlog"}, limit: 1}, want: "orders-peek"},
		{o: listOptions{filter: "topic"}, wantErr: `"topic" needs an operator and a value`},
		{o: listOptions{filter: "topic="}, wantErr: "a value is missing"},
		{o: listOptions{filter: "(topic=orders"}, wantErr: "'(' without ')'"},
		{o: listOptions{filter: "topic=orders)"}, wantErr: `unexpected ")"`},
		{o: listOptions{filter: `name="orders`}, wantErr: "unterminated quote"},
		{o: listOptions{filter: "name~(["}, wantErr: "error parsing regexp"},
		{o: listOptions{filter: "topic=orders AND"}, wantErr: "a term is missing"},
		{o: listOptions{sortBy: []string{"~"}}, wantErr: "--sort-by"},
		{o: listOptions{limit: -1}, wantErr: "--limit -1"},
	} {
		kept, err := tc.o.apply(rows)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%+v: error %v, want one with %q", tc.o, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", tc.o, err)
			continue
		}
		var names []string
		for _, r := range kept {
			names = append(names, r.(map[string]any)["name"].(string))
		}
		if got := strings.Join(names, ","); got != tc.want {
			t.Errorf("%+v kept %s, want %s", tc.o, got, tc.want)
		}
	}
}

func TestPubSubID(t *testing.T) {
	for _, tc := range []struct {
		name, coll, want, wantErr string
	}{
		{name: "orders", coll: collTopics, want: "orders"},
		{name: "projects/my-proj/topics/orders", coll: collTopics, want: "orders"},
		{name: "projects/p/subscriptions/s.1", coll: collSubscriptions, want: "s.1"},
		{name: "projects/p/snapshots/n", coll: collSnapshots, want: "n"},
		{name: "projects/p/subscriptions/s", coll: collTopics, wantErr: "names subscriptions, want one of the topics"},
		{name: "projects/p/topics", coll: collTopics, wantErr: "want projects/PROJECT/topics/ID"},
		{name: "projects/p/topics/t/x", coll: collTopics, wantErr: "want projects/PROJECT/topics/ID"},
	} {
		got, err := pubsubID(tc.name, tc.coll)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("pubsubID(%q, %s) = %q, %v; want an error with %q", tc.name, tc.coll, got, err, tc.wantErr)
			}
		case err != nil || got != tc.want:
			t.Errorf("pubsubID(%q, %s) = %q, %v; want %q", tc.name, tc.coll, got, err, tc.want)
		}
	}
}

func TestParseAttributes(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    map[string]string
		wantErr bool
	}{
		{in: []string{"a=1", "b=2"}, want: map[string]string{"a": "1", "b": "2"}},
		{in: []string{"a=1,b=2"}, want: map[string]string{"a": "1", "b": "2"}},
		{in: []string{"note=x,y"}, want: map[string]string{"note": "x,y"}},
		{in: []string{"a"}, wantErr: true},
		{in: []string{"=1"}, wantErr: true},
	} {
		got, err := parseAttributes(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseAttributes(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(tc.want)
		if err != nil || string(gb) != string(wb) {
			t.Errorf("parseAttributes(%q) = %s, %v; want %s", tc.in, gb, err, wb)
		}
	}
}

// TestCLIGcloudHabits drives a real `weir server` with commands as gcloud
// users type them: full resource names, --project and --region, pull
// without acknowledgement unless --auto-ack, --message, --ordering-key,
// --ack-deadline, and the list commands' --format projections, --filter,
// --sort-by and --limit.
func TestCLIGcloudHabits(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir())
	work := t.TempDir()
	const note = "weir: note: --project and --region ignored"
	steps := []cliCase{
		{name: "create topic by its full name, with --project", args: []string{"topics", "create", "projects/demo/topics/orders", "--project", "demo"},
			wantStdout: []string{"Created topic orders"}, wantStderr: []string{"weir: note: --project ignored"}},
		{name: "another topic", args: []string{"topics", "create", "clicks", "--region", "europe-west1"},
			wantStderr: []string{"weir: note: --region ignored"}},
		{name: "a subscription's name for a topic", args: []string{"topics", "describe", "projects/demo/subscriptions/orders"}, wantCode: ExitUsage,
			wantStderr: []string{"names subscriptions, want one of the topics"}},
		{name: "subscription, --ack-deadline and a full --topic", args: []string{"subscriptions", "create", "projects/demo/subscriptions/peek",
			"--topic", "projects/demo/topics/orders", "--ack-deadline", "30", "--project=demo", "--region=us-central1"},
			wantStdout: []string{"Created subscription peek on topic orders (ack wait 30s, new messages only)."}, wantStderr: []string{note}},
		{name: "a second subscription", args: []string{"subscriptions", "create", "all", "--topic", "orders"}},
		{name: "subscription, Pub/Sub's default ack deadline", args: []string{"subscriptions", "create", "clicks-sub", "--topic", "clicks", "--format", "json"},
			wantStdout: []string{`"ack_wait": "10s"`}},
		{name: "--ack-deadline out of range", args: []string{"subscriptions", "create", "x", "--topic", "clicks", "--ack-deadline", "5"}, wantCode: ExitUsage,
			wantStderr: []string{"--ack-deadline 5: want 10 to 600 seconds"}},
		{name: "publish --message with --ordering-key and gcloud's attribute list", args: []string{"topics", "publish", "projects/demo/topics/orders",
			"--message", "hello, world", "--ordering-key", "k1", "--attribute", "source=gcloud,batch=7"},
			wantStdout: []string{"Published 1 message to topic orders at sequence 1."}},
		{name: "publish a second", args: []string{"topics", "publish", "orders", "--message", "second"}, wantStdout: []string{"at sequence 2."}},
		{name: "--message with --file", args: []string{"topics", "publish", "orders", "--message", "x", "--file", "y"}, wantCode: ExitUsage,
			wantStderr: []string{"--message publishes one message"}},
		{name: "pull does not acknowledge", args: []string{"subscriptions", "pull", "projects/demo/subscriptions/peek", "--limit", "1"},
			wantStdout: []string{"hello, world", "attributes batch=7 goog_ordering_key=k1 source=gcloud", "1 message from subscription peek, left unacknowledged."}},
		{name: "backlog unchanged", args: []string{"subscriptions", "describe", "peek", "--format", "value(backlog,ack_floor)"}, wantStdout: []string{"2\t0\n"}},
		{name: "pull, projected", args: []string{"subscriptions", "pull", "peek", "--limit", "5", "--format", "csv(data,attributes.source)"},
			wantStdout: []string{"data,attributes.source\n"}},
		{name: "--force without --auto-ack", args: []string{"subscriptions", "pull", "peek", "--force"}, wantCode: ExitUsage, wantStderr: []string{"--force only applies with --auto-ack"}},
		{name: "pull --auto-ack acknowledges", args: []string{"subscriptions", "pull", "all", "--auto-ack", "--format", "value(data)"}},
		{name: "nothing left after --auto-ack", args: []string{"subscriptions", "describe", "all", "--format", "value(backlog,ack_floor)"}, wantStdout: []string{"0\t2\n"}},
		{name: "list, table projection", args: []string{"topics", "list", "--format", "table(name,messages:label=MSGS)"},
			wantStdout: []string{"NAME    MSGS\nclicks  0\norders  2\n"}},
		{name: "list, filter and value", args: []string{"topics", "list", "--filter", "messages>0", "--format", "value(name)"}, wantStdout: []string{"orders\n"}},
		{name: "list, sort and limit, text", args: []string{"subscriptions", "list", "--sort-by", "~name", "--limit", "1"},
			wantStdout: []string{"NAME  ", "peek"}},
		{name: "list, a glob", args: []string{"subscriptions", "list", "--filter", "topic:click*", "--format", "json"},
			wantStdout: []string{`"name": "clicks-sub"`}},
		{name: "list, yaml", args: []string{"subscriptions", "list", "--filter", "name=peek", "--format", "yaml"}, wantStdout: []string{"- ", "name: peek", "topic: orders"}},
		{name: "list, bad filter", args: []string{"topics", "list", "--filter", "name="}, wantCode: ExitUsage, wantStderr: []string{"--filter", "a value is missing"}},
		{name: "describe, bad format", args: []string{"topics", "describe", "orders", "--format", "table"}, wantCode: ExitUsage, wantStderr: []string{"want table(KEY,...)"}},
	}
	for _, st := range steps {
		r := srv.cli(work, st.args...)
		st.check(t, r)
		switch st.name {
		case "pull, projected":
			// The first message is out for its ack deadline (30 s): as
			// Pub/Sub, the next pull gets the second only.
			if r.stdout != "data,attributes.source\nsecond,\n" {
				t.Errorf("the CSV projection of the second message:\n%s", r.stdout)
			}
		case "pull --auto-ack acknowledges":
			if r.stdout != "hello, world\nsecond\n" {
				t.Errorf("pull --auto-ack --format value(data) printed %q, want both messages", r.stdout)
			}
		case "list, sort and limit, text":
			if strings.Contains(r.stdout, "clicks-sub") {
				t.Errorf("--limit 1 printed more than one subscription:\n%s", r.stdout)
			}
		case "list, a glob":
			if strings.Contains(r.stdout, `"name": "peek"`) {
				t.Errorf("--filter topic:click* kept the subscription of orders:\n%s", r.stdout)
			}
		}
	}
}

// TestCLIBeamLaunchLine: `weir run` takes a Beam YAML launch line's
// options: --yaml_pipeline_file, --runner (checked), --streaming, and
// gcloud's --project and --region.
func TestCLIBeamLaunchLine(t *testing.T) {
	totals := testdata(t, "totals.yaml")
	runCases(t, t.TempDir(), []cliCase{
		{name: "Beam's launch line", args: []string{"run", "--yaml_pipeline_file=" + totals, "--runner=DirectRunner", "--streaming", "--project=demo", "--region=us-central1"},
			wantStdout: []string{"Totals", "ELEMENTS_IN"}, wantStderr: []string{"weir: note: --runner DirectRunner: weir runs the pipeline itself", "weir: note: --project and --region ignored"}},
		{name: "--runner weir, no note", args: []string{"run", "--validate-only", "--runner", "weir", "--yaml-pipeline-file", totals}, wantStdout: []string{"valid pipeline of 5 steps"}},
		{name: "an unknown runner", args: []string{"run", "--runner=MagicRunner", totals}, wantCode: ExitUsage,
			wantStderr: []string{`--runner "MagicRunner": weir runs Beam YAML pipelines given as DirectRunner`}},
		{name: "the file twice", args: []string{"run", "--yaml_pipeline_file=" + totals, totals}, wantCode: ExitUsage, wantStderr: []string{"not both"}},
		{name: "no file", args: []string{"run", "--streaming"}, wantCode: ExitUsage, wantStderr: []string{"takes 1 argument (PIPELINE.yaml) or --yaml-pipeline-file"}},
	})
}

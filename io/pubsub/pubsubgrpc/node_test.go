package pubsubgrpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/io/pubsub/pubsubgrpc"
)

// nodeClientVersion is the npm package the Node.js test installs. (6.x
// needs @google-cloud/pubsub-api ^0.7, which the registry reached here
// does not serve.)
const nodeClientVersion = "@google-cloud/pubsub@5.3.1"

// nodeScript creates a topic and a subscription, publishes five messages
// with attributes, receives them through the client's streaming pull,
// acknowledges them, and prints what it saw as one JSON object.
const nodeScript = `
const {PubSub} = require('@google-cloud/pubsub');
(async () => {
  const ps = new PubSub({projectId: 'node-project'});
  const [topic] = await ps.createTopic('node-topic');
  const [sub] = await topic.createSubscription('node-sub');
  const ids = [];
  for (let i = 0; i < 5; i++) {
    ids.push(await topic.publishMessage({data: Buffer.from('m' + i), attributes: {i: String(i)}}));
  }
  const got = [];
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('received ' + got.length + ' of 5 messages in 30s')), 30000);
    sub.on('error', reject);
    sub.on('message', m => {
      got.push({id: m.id, data: m.data.toString(), attributes: m.attributes, publishTime: m.publishTime.toISOString()});
      m.ack();
      if (got.length === 5) { clearTimeout(t); resolve(); }
    });
  });
  await sub.close();
  console.log(JSON.stringify({ids, got}));
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
`

// nodeModules returns a directory holding node_modules with the Node.js
// client, installing it with npm into the user's cache directory (or
// $WEIR_TEST_NODE_DIR) the first time; it skips the test when node or npm
// is missing or the registry cannot be reached.
func nodeModules(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: the Node.js Pub/Sub client test needs node and npm")
	}
	dir := os.Getenv("WEIR_TEST_NODE_DIR")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			t.Skipf("no cache directory for the Node.js client (%v): set WEIR_TEST_NODE_DIR", err)
		}
		dir = filepath.Join(cache, "weir-test", "node-pubsub-"+strings.TrimPrefix(nodeClientVersion, "@google-cloud/pubsub@"))
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@google-cloud", "pubsub", "package.json")); err == nil {
		return dir
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed: the Node.js Pub/Sub client test needs it to install " + nodeClientVersion)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--prefix", dir, nodeClientVersion)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Skipf("npm could not install %s (is the npm registry reachable?): %v\n%s", nodeClientVersion, err, out.String())
	}
	return dir
}

func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the Node.js client")
	}
	modules := nodeModules(t)
	f := start(t, pubsubgrpc.Options{})
	script := filepath.Join(t.TempDir(), "client.js")
	if err := os.WriteFile(script, []byte(nodeScript), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(modules, "node_modules"), "PUBSUB_EMULATOR_HOST="+f.addr)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node client: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	var res struct {
		IDs []string `json:"ids"`
		Got []struct {
			ID          string            `json:"id"`
			Data        string            `json:"data"`
			Attributes  map[string]string `json:"attributes"`
			PublishTime string            `json:"publishTime"`
		} `json:"got"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node client printed %q: %v", stdout.String(), err)
	}
	if strings.Join(res.IDs, ",") != "1,2,3,4,5" {
		t.Fatalf("message IDs %v, want the topic's sequences 1..5", res.IDs)
	}
	var datas []string
	for _, m := range res.Got {
		if m.Attributes["i"] != strings.TrimPrefix(m.Data, "m") || len(m.Attributes) != 1 {
			t.Errorf("message %s: data %q attributes %v", m.ID, m.Data, m.Attributes)
		}
		if pt, err := time.Parse(time.RFC3339Nano, m.PublishTime); err != nil || time.Since(pt) > time.Minute {
			t.Errorf("message %s: publish time %q", m.ID, m.PublishTime)
		}
		datas = append(datas, m.ID+"="+m.Data)
	}
	sort.Strings(datas)
	if strings.Join(datas, ",") != "1=m0,2=m1,3=m2,4=m3,5=m4" {
		t.Fatalf("received %v", datas)
	}
	// What Node published is weir's: the topic holds it, the
	// subscription has acknowledged it all.
	info, err := f.b.Topic(ctx, "node-topic")
	if err != nil || info.Messages != 5 {
		t.Fatalf("topic node-topic: %+v %v", info, err)
	}
	if !await.Until(10*time.Second, 20*time.Millisecond, func() bool {
		sub, err := f.b.Subscription(ctx, "node-sub")
		return err == nil && sub.PerMessageAck && sub.Backlog == 0
	}) {
		sub, err := f.b.Subscription(ctx, "node-sub")
		t.Fatalf("subscription node-sub after the client acknowledged everything: %+v %v", sub, err)
	}
}

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/internal/await"
	"github.com/weir-dev/weir/internal/natscluster"
)

// The failover benchmark: two `weir server --cluster` members over a
// three-server NATS JetStream cluster (in the benchmark's process), a
// windowed job fed by a generator, and the leader killed with SIGKILL
// again and again. Each kill is timed to the moment the survivor holds
// the lease, and to the moment the job has taken a checkpoint past the
// last one before the kill on the survivor: processing resumed, from the
// replica the survivor kept. The killed member then comes back as a
// follower for the next round.

// FailoverConfig configures RunFailover.
type FailoverConfig struct {
	// Exe is the weir binary the members run.
	Exe string
	// Kills is how many times the leader is stopped.
	Kills int
	// Leave stops the leader with SIGTERM (it checkpoints every job and
	// gives the lease up: a handover) instead of SIGKILL.
	Leave bool
	// Lease is the members' --cluster-lease.
	Lease time.Duration
	// Dir holds the members' data directories, the NATS stores and the
	// job's table; it must exist.
	Dir string
	// Logger receives progress lines.
	Logger *slog.Logger
}

// FailoverKill is one kill's figures, in milliseconds since the kill.
type FailoverKill struct {
	// TakeoverMS is when a member answered as the new leader.
	TakeoverMS float64 `json:"takeover_ms"`
	// ResumedMS is when the job had taken a checkpoint on the new leader
	// past its last one before the kill.
	ResumedMS float64 `json:"resumed_ms"`
}

// FailoverResult is RunFailover's report.
type FailoverResult struct {
	LeaseMS float64 `json:"lease_ms"`
	// Signal is how the leader was stopped: "SIGKILL" or "SIGTERM".
	Signal string         `json:"signal"`
	Kills  []FailoverKill `json:"kills"`
	// Takeover and Resumed are the kills' p50 and p99 (nearest rank).
	TakeoverP50 float64 `json:"takeover_p50_ms"`
	TakeoverP99 float64 `json:"takeover_p99_ms"`
	ResumedP50  float64 `json:"resumed_p50_ms"`
	ResumedP99  float64 `json:"resumed_p99_ms"`
}

const failoverPipeline = `pipeline:
  transforms:
    - type: Generate
      name: Events
      config: {rate: 500, keys: 50, spacing: 2ms}
    - type: Combine
      name: Counts
      input: Events
      windowing: {type: fixed, size: 10s}
      config:
        group_by: key
        combine: {n: {value: key, fn: count}}
    - type: WriteToSql
      name: Write
      input: Counts
      config: {dsn: "%s", table: counts, key: [key]}
`

// member is one `weir server --cluster` child process.
type member struct {
	cmd  *exec.Cmd
	url  string
	c    *client.Client
	done chan error
}

// RunFailover runs the failover benchmark.
func RunFailover(ctx context.Context, cfg FailoverConfig) (*FailoverResult, error) {
	if cfg.Kills < 1 {
		return nil, errors.New("failover: --kills must be at least 1")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var natsDirs []string
	for i := range 3 {
		d := filepath.Join(cfg.Dir, fmt.Sprintf("nats-%d", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		natsDirs = append(natsDirs, d)
	}
	nc, err := natscluster.New(natsDirs, 0)
	if err != nil {
		return nil, fmt.Errorf("failover: starting the NATS cluster: %w", err)
	}
	defer nc.Close()
	dataDirs := []string{filepath.Join(cfg.Dir, "member-0"), filepath.Join(cfg.Dir, "member-1")}
	start := func(i int) (*member, error) {
		return startMember(cfg, dataDirs[i], nc.URLs(), filepath.Join(cfg.Dir, fmt.Sprintf("member-%d.log", i)))
	}
	members := make([]*member, 2)
	defer func() {
		for _, m := range members {
			if m != nil {
				m.kill()
			}
		}
	}()
	if members[0], err = start(0); err != nil {
		return nil, err
	}
	if err := waitLeader(ctx, members[0], members[0].url, time.Minute); err != nil {
		return nil, err
	}
	if members[1], err = start(1); err != nil {
		return nil, err
	}
	db := filepath.Join(cfg.Dir, "counts.db")
	if _, err := members[1].c.Submit(ctx, client.SubmitRequest{Name: "failover", Pipeline: fmt.Sprintf(failoverPipeline, db), BaseDir: cfg.Dir}); err != nil {
		return nil, fmt.Errorf("failover: submitting the job through the follower: %w", err)
	}
	sig := syscall.SIGKILL
	if cfg.Leave {
		sig = syscall.SIGTERM
	}
	res := &FailoverResult{LeaseMS: ms(cfg.Lease), Signal: map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM"}[sig]}
	leader, follower := 0, 1
	for k := range cfg.Kills {
		before, err := waitEpoch(ctx, members[leader].c, 0, 3, time.Minute)
		if err != nil {
			return nil, fmt.Errorf("failover: before kill %d: %w", k+1, err)
		}
		killed := time.Now()
		if err := members[leader].stop(sig); err != nil {
			return nil, fmt.Errorf("failover: stopping the leader (%s): %w", res.Signal, err)
		}
		members[leader] = nil
		if err := waitLeader(ctx, members[follower], members[follower].url, time.Minute); err != nil {
			return nil, fmt.Errorf("failover: kill %d: %w", k+1, err)
		}
		took := time.Since(killed)
		if _, err := waitEpoch(ctx, members[follower].c, before, 1, time.Minute); err != nil {
			return nil, fmt.Errorf("failover: kill %d: the job did not resume: %w", k+1, err)
		}
		resumed := time.Since(killed)
		res.Kills = append(res.Kills, FailoverKill{TakeoverMS: ms(took), ResumedMS: ms(resumed)})
		cfg.Logger.Info("failover", "kill", k+1, "takeover", took.Round(time.Millisecond).String(), "resumed", resumed.Round(time.Millisecond).String())
		if members[leader], err = start(leader); err != nil {
			return nil, err
		}
		leader, follower = follower, leader
	}
	var take, resume []float64
	for _, k := range res.Kills {
		take, resume = append(take, k.TakeoverMS), append(resume, k.ResumedMS)
	}
	res.TakeoverP50, res.TakeoverP99 = Percentile(take, 50), Percentile(take, 99)
	res.ResumedP50, res.ResumedP99 = Percentile(resume, 50), Percentile(resume, 99)
	return res, nil
}

func startMember(cfg FailoverConfig, dataDir, urls, logPath string) (*member, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cfg.Exe, "server", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--checkpoint-interval", "100ms",
		"--pubsub-grpc-listen", "", "--file-roots", cfg.Dir, "--cluster", "bench", "--nats-url", urls,
		"--cluster-lease", cfg.Lease.String(), "--log-level", "info")
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("failover: starting weir server: %w", err)
	}
	m := &member{cmd: cmd, done: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			first <- sc.Text()
		}
		close(first)
		_, _ = io.Copy(io.Discard, out)
		m.done <- cmd.Wait()
		logf.Close()
	}()
	select {
	case line := <-first:
		const prefix = "weir server listening on "
		if !strings.HasPrefix(line, prefix) {
			m.kill()
			return nil, fmt.Errorf("failover: weir server printed %q (log in %s)", line, logPath)
		}
		m.url, _, _ = strings.Cut(strings.TrimPrefix(line, prefix), " ")
	case <-time.After(time.Minute):
		m.kill()
		return nil, fmt.Errorf("failover: weir server did not start (log in %s)", logPath)
	}
	if m.c, err = client.NewClient(m.url, nil); err != nil {
		m.kill()
		return nil, err
	}
	return m, nil
}

func (m *member) kill() { _ = m.stop(syscall.SIGKILL) }

// stop sends sig and waits for the process's end: an error when a
// SIGTERM'd member did not exit 0.
func (m *member) stop(sig syscall.Signal) error {
	_ = m.cmd.Process.Signal(sig)
	err := <-m.done
	if sig == syscall.SIGKILL {
		return nil
	}
	return err
}

// waitLeader polls m until it reports the member at want as the leader.
func waitLeader(ctx context.Context, m *member, want string, d time.Duration) error {
	return poll(ctx, d, 10*time.Millisecond, func() bool {
		cm, err := m.c.ClusterMembers(ctx)
		return err == nil && len(cm.Members) > 0 && cm.Members[0].Leader && cm.Members[0].Address == want
	}, "the member at "+want+" to lead")
}

// waitEpoch polls job failover through c until its last checkpoint's
// epoch is at least after+n, and returns that epoch.
func waitEpoch(ctx context.Context, c *client.Client, after uint64, n uint64, d time.Duration) (uint64, error) {
	var epoch uint64
	err := poll(ctx, d, 10*time.Millisecond, func() bool {
		j, err := c.Get(ctx, "failover")
		if err != nil || j.State != client.JobState("RUNNING") || j.LastCheckpoint == nil {
			return false
		}
		epoch = j.LastCheckpoint.Epoch
		return epoch >= after+n
	}, "the job's checkpoints")
	return epoch, err
}

// poll waits until cond holds (await.Until), up to d, or ctx ends.
func poll(ctx context.Context, d, every time.Duration, cond func() bool, what string) error {
	if !await.Until(d, every, func() bool { return ctx.Err() != nil || cond() }) {
		return fmt.Errorf("timed out after %s waiting for %s", d, what)
	}
	return ctx.Err()
}

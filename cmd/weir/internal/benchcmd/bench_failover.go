package benchcmd

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/bench"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
)

func newBenchFailoverCommand(e *cli.Env) *cobra.Command {
	var kills int
	var leave bool
	var lease time.Duration
	var format string
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "A cluster's failover time: a member takes over and the job resumes after kill -9 of the leader",
		Long: `failover starts a NATS JetStream cluster of three servers in its own process
and two 'weir server --cluster' members as child processes (--cluster-lease
--lease), submits a windowed job fed by a generator (500 events/s, a
checkpoint every 100ms) through the follower, and kills the leader with
SIGKILL --kills times, bringing it back as a follower after each kill. For
each kill it reports when the survivor answered as the leader (takeover) and
when the job had taken a checkpoint on it past its last one before the kill
(resumed: processing goes on from the replica), and their p50 and p99
(nearest rank). With --leave the leader is stopped with SIGTERM instead: it
checkpoints every job and gives the lease up, and the figures are a
handover's.`,
		Args: cli.ExactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckFormat(format); err != nil {
				return err
			}
			if kills < 1 || lease < 100*time.Millisecond {
				return cli.UsageErrorf("--kills must be at least 1 and --lease at least 100ms")
			}
			exe, err := os.Executable()
			if err != nil {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the weir binary: %w", err))
			}
			dir, err := os.MkdirTemp("", "weir-bench-failover-")
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			defer os.RemoveAll(dir)
			res, err := bench.RunFailover(cmd.Context(), bench.FailoverConfig{Exe: exe, Kills: kills, Leave: leave, Lease: lease, Dir: dir, Logger: e.Logger})
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			if format == cli.FormatJSON {
				return cli.WriteJSON(e.Stdout, res)
			}
			fmt.Fprintf(e.Stdout, "lease %s, the leader stopped %d times with %s, %d CPUs\n", lease, len(res.Kills), res.Signal, runtime.NumCPU())
			fmt.Fprintf(e.Stdout, "takeover  p50 %6.0f ms  p99 %6.0f ms\n", res.TakeoverP50, res.TakeoverP99)
			_, err = fmt.Fprintf(e.Stdout, "resumed   p50 %6.0f ms  p99 %6.0f ms  (target: within 10 s with the default lease)\n", res.ResumedP50, res.ResumedP99)
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&kills, "kills", 20, "how many times the leader is stopped")
	fl.BoolVar(&leave, "leave", false, "stop the leader with SIGTERM (a handover) instead of SIGKILL")
	fl.DurationVar(&lease, "lease", 4*time.Second, "the members' --cluster-lease")
	cli.AddFormatFlag(cmd, &format)
	return cmd
}

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weir-dev/weir/client"
)

func newClusterCommand(e *env) *cobra.Command {
	return groupCommand("cluster", "Look at the weir cluster a server belongs to",
		`Cluster shows the weir cluster the server at --server ($WEIR_SERVER, default
http://127.0.0.1:7070) belongs to: the servers started with 'weir server
--cluster NAME --nats-url URL[,URL...]' over one NATS JetStream cluster. Any
member answers.

One member leads: it holds the cluster's lease and runs every job (all of
their key groups). The others keep a replica of its state store, applied
from the cluster's replicated log, forward API requests to it, and take over
within the lease (--cluster-lease, default 4s) when it is lost: the jobs
resume from their last checkpoints. See docs/CLUSTER.md.

Exit codes: 0 success, 1 the server is not a cluster member (NOT_FOUND), 5
no weir server answers.`,
		newClusterMembersCommand(e))
}

func newClusterMembersCommand(e *env) *cobra.Command {
	return showCommand(e, showSpec[*client.ClusterMembers]{
		use:   "members",
		short: "List the cluster's members (MEMBER ADDRESS ROLE KEY_GROUPS LOG_SEQUENCE BEHIND STARTED LAST_SEEN)",
		args:  exactArgs(),
		fetch: func(ctx context.Context, c *client.Client, _ []string) (*client.ClusterMembers, error) {
			return c.ClusterMembers(ctx)
		},
		text: func(w io.Writer, cm *client.ClusterMembers) error {
			if _, err := fmt.Fprintf(w, "Cluster %s (answered by member %s)\n", cm.Cluster, cm.Answered); err != nil {
				return err
			}
			var head uint64 // the leader's log sequence
			for _, m := range cm.Members {
				if m.Leader {
					head = m.LogSequence
				}
			}
			err := writeTable(w, "MEMBER\tADDRESS\tROLE\tKEY_GROUPS\tLOG_SEQUENCE\tBEHIND\tSTARTED\tLAST_SEEN", cm.Members, func(m client.ClusterMember) string {
				role := m.Role
				if !m.Up {
					role += " (not seen for " + time.Since(m.LastSeen).Round(time.Second).String() + ")"
				}
				behind := "-"
				if !m.Leader && head > 0 {
					behind = fmt.Sprint(head - min(head, m.LogSequence))
				}
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s", m.ID, m.Address, role, keyGroupsText(m), m.LogSequence, behind,
					formatTime(m.StartTime), formatTime(m.LastSeen))
			})
			if err != nil {
				return err
			}
			for _, m := range cm.Members {
				if len(m.SettingsDiffer) == 0 {
					continue
				}
				if _, err := fmt.Fprintf(w, "Member %s runs with other settings than the leader: --%s. A member that takes over runs every job with its own: give every member the same.\n",
					m.ID, strings.Join(m.SettingsDiffer, ", --")); err != nil {
					return err
				}
			}
			return nil
		},
	})
}

// keyGroupsText says which key groups a member holds: the leader all of
// its jobs', a follower none (it keeps a replica).
func keyGroupsText(m client.ClusterMember) string {
	if !m.Leader {
		return "none (replica)"
	}
	if len(m.Jobs) == 0 {
		return "all (no job runs)"
	}
	return fmt.Sprintf("all of %d job(s): %s", len(m.Jobs), strings.Join(m.Jobs, ", "))
}

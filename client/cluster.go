package client

import (
	"context"
	"net/http"
	"time"
)

// ClusterMember is one member of a weir cluster (GET /v1/cluster/members).
type ClusterMember struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// Role is "leader" (it runs every job: all their key groups) or
	// "follower" (it keeps a replica of the leader's state store and
	// forwards the API to the leader).
	Role      string    `json:"role"`
	Leader    bool      `json:"leader"`
	StartTime time.Time `json:"start_time"`
	// LastSeen is when the member last refreshed its record; Up is false
	// once that is older than a lease and its renewals.
	LastSeen time.Time `json:"last_seen"`
	Up       bool      `json:"up"`
	// LogSequence is the last entry of the cluster's log the member's
	// store holds.
	LogSequence uint64 `json:"log_sequence"`
	// Jobs names the jobs the member runs.
	Jobs []string `json:"jobs,omitempty"`
	// SettingsDiffer names the member's job settings (weir server flags
	// such as checkpoint-interval or file-roots) whose values are not the
	// leader's: were it to take over, it would run the jobs with its own.
	SettingsDiffer []string `json:"settings_differ,omitempty"`
}

// ClusterMembers is the answer of GET /v1/cluster/members.
type ClusterMembers struct {
	Cluster string `json:"cluster"`
	// Answered is the ID of the member that answered.
	Answered string          `json:"answered"`
	Members  []ClusterMember `json:"members"`
}

// ClusterMembers lists the members of the cluster the server belongs to;
// a server outside a cluster answers NOT_FOUND.
func (c *Client) ClusterMembers(ctx context.Context) (*ClusterMembers, error) {
	var out ClusterMembers
	if err := c.do(ctx, http.MethodGet, "/v1/cluster/members", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

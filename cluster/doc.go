// Package cluster makes several weir servers one service over a NATS
// JetStream cluster, using JetStream for everything that needs agreement:
// nothing here implements consensus, gossip or failure detection.
//
//   - Membership: each member keeps a record in the cluster's replicated
//     key-value bucket (WEIR_CLUSTER_<name>), refreshed while it lives;
//     Members lists them.
//   - Leadership: one member holds the lease (the bucket's "leader" key),
//     renewed by compare-and-set on its revision. A member that sees the
//     revision unchanged for a whole lease takes it over the same way, so
//     two members never both believe they took one revision.
//   - The registry's log: the leader's state store writes every batch to a
//     replicated stream (WEIR_CLUSTER_LOG_<name>) before it commits it
//     (state.Replicator), each part published with the sequence it expects
//     the log to end at. The other members apply the log to their own
//     stores, so any of them can take over with the whole registry, every
//     checkpoint and every snapshot. A new leader appends a marker once it
//     holds the whole log: from then on every append of an earlier leader
//     fails (its expected sequence is gone), so a leader that lost the
//     lease (a pause, a cut connection) can commit nothing more — no
//     checkpoint, and so no sink commit or acknowledgement that follows
//     one.
//
// It may import github.com/nats-io/nats.go and the standard library.
package cluster
